// burst_s3_bench: checkpoint upload and download throughput of the s3://
// store against curl moving the same bytes to the same endpoint, in the same
// run (docs/bench.md, "S3 store"). Starts its own radosgw (tests/s3/s3-up.sh)
// unless BURST_TEST_S3_URL names one (with AWS_* set).
//
//   burst_s3_bench [--mb 256] [--repeats 3] [--part-mb 16] [--parallel 4]
//
// Each repeat times, alternating who goes first: Burst PutFile, curl PUT
// (--aws-sigv4, UNSIGNED-PAYLOAD: curl does not hash the body), Burst
// GetToFile, curl GET; medians reported, and Burst/curl ratios (goal >= 0.8).
#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "core/fs.h"
#include "core/ids.h"
#include "core/subprocess.h"
#include "store/s3_store.h"
#include "store/s3_test_service.h"

namespace burst {
namespace {

double Seconds(const std::function<void()>& fn) {
  auto t0 = std::chrono::steady_clock::now();
  fn();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

void Curl(const std::vector<std::string>& extra) {
  std::vector<std::string> argv = {
      "curl",
      "-sf",
      "--aws-sigv4",
      "aws:amz:us-east-1:s3",
      "--user",
      std::string(std::getenv("AWS_ACCESS_KEY_ID")) + ":" + std::getenv("AWS_SECRET_ACCESS_KEY"),
      "-H",
      "x-amz-content-sha256: UNSIGNED-PAYLOAD"};
  argv.insert(argv.end(), extra.begin(), extra.end());
  auto r = RunCommand(argv, 600'000);
  if (!r.ok() || r.value().exit_code != 0) {
    throw Error(Code::kUnavailable, "curl failed: " + (r.ok() ? r.value().err : r.status().ToString()));
  }
}

int Main(int argc, char** argv) {
  CLI::App app("Burst's s3:// store vs curl, same bytes, same endpoint");
  int mb = 256, repeats = 3, part_mb = 16, parallel = 4;
  app.add_option("--mb", mb, "object size, MiB")->capture_default_str();
  app.add_option("--repeats", repeats)->capture_default_str();
  app.add_option("--part-mb", part_mb, "multipart part size, MiB")->capture_default_str();
  app.add_option("--parallel", parallel, "parts in flight")->capture_default_str();
  CLI11_PARSE(app, argc, argv);

  S3TestService service;
  if (Status s = service.Start(7780); !s.ok()) {
    std::fprintf(stderr, "%s\n", s.ToString().c_str());
    return 1;
  }
  auto config = ParseS3Url(std::string(std::getenv("BURST_TEST_S3_URL")));
  if (!config.ok()) throw Error(config.status());
  S3Config c = config.value();
  c.prefix = NewId("bench") + "/";
  c.part_bytes = static_cast<int64_t>(part_mb) << 20;
  c.parallel_parts = parallel;
  auto store = NewS3Store(c);
  if (!store.ok()) throw Error(store.status());

  const fs::path dir = MakeTempDir("burst-s3-bench");
  const fs::path src = dir / "model.safetensors";
  {
    std::string data(static_cast<size_t>(mb) << 20, '\0');
    uint64_t x = 88172645463325252ull;
    for (size_t i = 0; i + 8 <= data.size(); i += 8) {
      x ^= x << 13, x ^= x >> 7, x ^= x << 17;
      std::memcpy(&data[i], &x, 8);
    }
    WriteFileAtomic(src, data);
  }
  const std::string endpoint = c.endpoint, bucket = c.bucket;
  const std::string curl_url = endpoint + "/" + bucket + "/" + c.prefix + "curl.bin";
  std::vector<double> bput, cput, bget, cget;
  for (int r = 0; r < repeats; ++r) {
    auto burst_put = [&] {
      bput.push_back(Seconds([&] {
        if (Status s = store.value()->PutFile("burst.bin", src); !s.ok()) throw Error(s);
      }));
    };
    auto curl_put = [&] { cput.push_back(Seconds([&] { Curl({"-T", src.string(), curl_url}); })); };
    auto burst_get = [&] {
      bget.push_back(Seconds([&] {
        if (Status s = store.value()->GetToFile("burst.bin", dir / "burst.out"); !s.ok()) throw Error(s);
      }));
    };
    auto curl_get = [&] {
      cget.push_back(Seconds([&] { Curl({"-o", (dir / "curl.out").string(), curl_url}); }));
    };
    if (r % 2 == 0) {
      burst_put(), curl_put(), burst_get(), curl_get();
    } else {
      curl_put(), burst_put(), curl_get(), burst_get();
    }
  }
  if (Sha256File(dir / "burst.out") != Sha256File(src) || Sha256File(dir / "curl.out") != Sha256File(src)) {
    std::fprintf(stderr, "a download differs from the upload\n");
    return 1;
  }
  const double mib = mb;
  const double up_b = mib / Median(bput), up_c = mib / Median(cput);
  const double down_b = mib / Median(bget), down_c = mib / Median(cget);
  std::printf("| %d MiB object, %d repeats, parts %d MiB x %d | Burst MiB/s | curl MiB/s | Burst / curl |\n",
              mb, repeats, part_mb, parallel);
  std::printf("|---|---|---|---|\n");
  std::printf("| upload | %.0f | %.0f | %.2f |\n", up_b, up_c, up_b / up_c);
  std::printf("| download | %.0f | %.0f | %.2f |\n", down_b, down_c, down_b / down_c);
  fs::remove_all(dir);
  return 0;
}

}  // namespace
}  // namespace burst

int main(int argc, char** argv) {
  try {
    return burst::Main(argc, argv);
  } catch (const burst::Error& e) {
    std::fprintf(stderr, "burst_s3_bench: %s\n", e.status().ToString().c_str());
    return 1;
  }
}
