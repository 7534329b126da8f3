// The test bucket (S3TestService's radosgw) as the e2e tests read it: an
// object's bytes fetched with curl, not with Burst's own S3 client.
#pragma once

#include <cstdlib>
#include <optional>
#include <string>

#include "core/fs.h"
#include "core/subprocess.h"

namespace burst::e2e {

// burst-test/KEY's bytes on the radosgw of S3TestService (its AWS_* and
// BURST_TEST_S3_ENDPOINT), fetched with curl's own SigV4; nullopt, with
// `why`, when it cannot be read.
inline std::optional<std::string> BucketObject(const std::string& key, std::string* why = nullptr) {
  const std::string url = std::string(std::getenv("BURST_TEST_S3_ENDPOINT")) + "/burst-test/" + key;
  const std::string user =
      std::string(std::getenv("AWS_ACCESS_KEY_ID")) + ":" + std::getenv("AWS_SECRET_ACCESS_KEY");
  auto r = RunCommand({"curl", "-sf", "--aws-sigv4", "aws:amz:us-east-1:s3", "--user", user, "-H",
                       "x-amz-content-sha256: " + Sha256Hex(""), url},
                      30'000, {}, 64 << 20);
  std::string failure;
  if (!r.ok())
    failure = "(curl: " + r.status().ToString() + ")";
  else if (r.value().exit_code != 0)
    failure = "(curl exit " + std::to_string(r.value().exit_code) + " for " + url + ")";
  if (failure.empty()) return r.value().out;
  if (why) *why = failure;
  return std::nullopt;
}

// sha256 of burst-test/KEY, or a "(...)" message when it cannot be read.
inline std::string BucketObjectSha(const std::string& key) {
  std::string why;
  auto bytes = BucketObject(key, &why);
  return bytes ? Sha256Hex(*bytes) : why;
}

}  // namespace burst::e2e
