// For tests: a real S3 service (radosgw, tests/s3/s3-up.sh) started in a
// temporary folder and stopped at the end, or the one BURST_TEST_S3_URL
// already names (with AWS_* set), which the tests then use as it is.
// Start() exports AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_REGION,
// BURST_TEST_S3_ENDPOINT and BURST_TEST_S3_URL for the test process (and the
// processes it starts).
#pragma once

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "core/fs.h"
#include "core/status.h"
#include "core/subprocess.h"

namespace burst {

class S3TestService {
 public:
  // port: radosgw's (the mon takes the next two).
  Status Start(int port) {
    if (const char* url = std::getenv("BURST_TEST_S3_URL"); url != nullptr && *url != '\0') return Status();
    dir_ = MakeTempDir("burst-s3");
    const std::string up = std::string(BURST_SOURCE_DIR) + "/tests/s3/s3-up.sh";
    auto r = RunCommand({up, dir_.string(), std::to_string(port)}, 120'000);
    if (!r.ok()) return r.status();
    if (r.value().exit_code != 0) {
      return Status(Code::kUnavailable, "tests/s3/s3-up.sh failed: " + r.value().err + r.value().out);
    }
    std::ifstream env(dir_ / "env");
    std::string line;
    while (std::getline(env, line)) {
      size_t eq = line.find('=');
      if (eq == std::string::npos) continue;
      ::setenv(line.substr(0, eq).c_str(), line.substr(eq + 1).c_str(), 1);
      set_.push_back(line.substr(0, eq));
    }
    return Status();
  }
  void Stop() {
    if (dir_.empty()) return;
    // What Start set goes with the service: a later Start makes its own.
    for (const std::string& name : set_) ::unsetenv(name.c_str());
    set_.clear();
    const std::string down = std::string(BURST_SOURCE_DIR) + "/tests/s3/s3-down.sh";
    auto r = RunCommand({down, dir_.string()}, 60'000);
    (r.ok() ? Status() : r.status()).IgnoreError("best effort: the folder goes next");
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
    dir_.clear();
  }
  ~S3TestService() { Stop(); }

 private:
  std::filesystem::path dir_;
  std::vector<std::string> set_;  // the variables Start set
};

}  // namespace burst
