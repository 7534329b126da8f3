// A real Slurm for the e2e tests: a single-node cluster started for a test
// (TestSlurm), what Burst's jobs in its queue are, the variables Slurm
// workers must get to compute like local ones, and the executor the jobs
// and deployments suites run on (E2eExecutor: local, or Slurm).
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "core/subprocess.h"
#include "e2e_s3.h"
#include "e2e_util.h"
#include "store/s3_test_service.h"

extern char** environ;

namespace burst::e2e {

// Burst's jobs in Slurm's queue that have not ended, one "name STATE" a line.
inline std::string LiveSlurmJobs() {
  auto r = RunCommand({"squeue", "--noheader", "--format=%j %T"}, 10'000);
  return r.ok() ? r.value().out : "(squeue: " + r.status().ToString() + ")";
}

// Slurm's workers run with --export=NONE: burst serve passes on the
// variables that choose numeric kernels itself (runtime/executor.h,
// kNumericsEnv); the test's other OpenBLAS, MKL, ATen and OpenMP settings go with them
// as --worker-env too, so workers of both executors run alike.
inline std::vector<std::string> WorkerEnvFlags() {
  std::vector<std::string> flags;
  for (char** e = environ; *e != nullptr; ++e) {
    std::string kv = *e;
    if (kv.rfind("OPENBLAS_", 0) == 0 || kv.rfind("OMP_", 0) == 0 || kv.rfind("MKL_", 0) == 0 ||
        kv.rfind("ATEN_CPU_CAPABILITY=", 0) == 0)
      flags.insert(flags.end(), {"--worker-env", kv});
  }
  return flags;
}

// A single-node Slurm for a test (tests/slurm/slurm-up.sh) in a folder of
// its own, on Slurm's default ports (CTest holds the "slurm" lock for the
// tests that start one); SLURM_CONF points at it while it runs, so the
// Slurm tools and `burst serve` find it. With a REST port, slurmrestd too.
class TestSlurm {
 public:
  TestSlurm() = default;
  TestSlurm(const TestSlurm&) = delete;
  TestSlurm& operator=(const TestSlurm&) = delete;
  ~TestSlurm() {
    if (!started_) return;
    (void)RunCommand({(SourceDir() / "tests/slurm/slurm-down.sh").string(), conf_dir().string()},
                     60'000);  // best effort: the folder goes next
    ::unsetenv("SLURM_CONF");
  }

  // Starts slurmctld, slurmd (and slurmrestd on rest_port > 0) and waits
  // for the node to be idle; what went wrong otherwise.
  std::string Start(int rest_port = 0) {
    if (rest_port > 0) ::setenv("BURST_SLURM_REST_PORT", std::to_string(rest_port).c_str(), 1);
    auto r = RunCommand({(SourceDir() / "tests/slurm/slurm-up.sh").string(), conf_dir().string()}, 60'000);
    ::unsetenv("BURST_SLURM_REST_PORT");
    if (!r.ok()) return "slurm-up.sh: " + r.status().ToString();
    started_ = true;  // whatever part of it started is stopped again
    if (r.value().exit_code != 0) return "slurm-up.sh failed: " + r.value().out + r.value().err;
    ::setenv("SLURM_CONF", (conf_dir() / "slurm.conf").c_str(), 1);
    for (const std::string& line : Lines(Slurp(conf_dir() / "env"))) {
      if (line.rfind("SLURM_JWT=", 0) == 0) rest_token_ = line.substr(10);
      if (line.rfind("BURST_TEST_SLURM_REST=", 0) == 0) rest_url_ = line.substr(22);
    }
    if (rest_port > 0 && (rest_url_.empty() || rest_token_.empty()))
      return "slurm-up.sh started no slurmrestd";
    return "";
  }

  const fs::path& dir() const { return dir_.path(); }          // for the test's own files too
  fs::path conf_dir() const { return dir_.path() / "slurm"; }  // slurm.conf, logs, pid files
  std::string slurmd_pid() const { return Slurp(conf_dir() / "slurmd.pid"); }
  const std::string& rest_url() const { return rest_url_; }
  const std::string& rest_token() const { return rest_token_; }

 private:
  TempDir dir_{"burst-e2e-slurm"};
  bool started_ = false;
  std::string rest_url_, rest_token_;
};

// The executor the jobs, deployments and gang suites run on: the local
// one, or, with BURST_E2E_EXECUTOR=slurm (CTest's e2e_*_on_slurm entries),
// workers as Slurm batch jobs on a single-node Slurm started for the test
// binary. Those workers share the control plane's folders (a shared path,
// as on a cluster with a shared filesystem; e2e_slurm_test covers workers
// that see none of them), and a signal sent to a worker's pid reaches it as
// on a node. With BURST_E2E_STORE=s3 too, the store is a bucket on a real
// radosgw started for the binary (s3://burst-test/e2e-PID, StoreKeySha
// reads it back). Register it with ::testing::AddGlobalTestEnvironment.
class E2eExecutor : public ::testing::Environment {
 public:
  static bool OnSlurm() { return Env("BURST_E2E_EXECUTOR") == "slurm"; }
  static bool OnS3() { return Env("BURST_E2E_STORE") == "s3"; }
  // The servers' prefix in the test bucket.
  static std::string S3Prefix() { return "e2e-" + std::to_string(::getpid()); }
  // `flags` with the executor's and the store's own added.
  static std::vector<std::string> With(std::vector<std::string> flags) {
    if (OnSlurm()) {
      flags.insert(flags.end(), {"--executor", "slurm"});
      for (const std::string& f : WorkerEnvFlags()) flags.push_back(f);
    }
    if (OnS3()) {
      flags.insert(flags.end(), {"--store", "s3://burst-test/" + S3Prefix(), "--s3-endpoint",
                                 Env("BURST_TEST_S3_ENDPOINT")});
    }
    return flags;
  }
  // sha256 of the object at `key` (below the store's root) of the server
  // whose data folder is `data`, or a "(...)" message naming what is missing.
  static std::string StoreKeySha(const fs::path& data, const std::string& key) {
    if (OnS3()) return BucketObjectSha(S3Prefix() + "/" + key);
    const fs::path f = data / "store" / "objects" / key;
    return fs::is_regular_file(f) ? Sha256File(f) : "(missing " + f.string() + ")";
  }
  void SetUp() override {
    const std::string e = Env("BURST_E2E_EXECUTOR"), store = Env("BURST_E2E_STORE");
    ASSERT_TRUE(e.empty() || OnSlurm() || e == "local")
        << "BURST_E2E_EXECUTOR must be local or slurm, not " << e;
    ASSERT_TRUE(store.empty() || OnS3() || store == "file")
        << "BURST_E2E_STORE must be file or s3, not " << store;
    if (OnS3()) {
      s3_ = std::make_unique<S3TestService>();
      Status s = s3_->Start(7680);
      ASSERT_TRUE(s.ok()) << s.ToString();
      std::printf("[e2e] the store is s3://burst-test/%s on radosgw at %s\n", S3Prefix().c_str(),
                  Env("BURST_TEST_S3_ENDPOINT").c_str());
    }
    if (!OnSlurm()) return;
    slurm_ = std::make_unique<TestSlurm>();
    const std::string failed = slurm_->Start();
    ASSERT_TRUE(failed.empty()) << failed;
    std::printf("[e2e] workers run as Slurm jobs (SLURM_CONF=%s)\n", std::getenv("SLURM_CONF"));
  }
  void TearDown() override {
    if (slurm_) {
      EXPECT_TRUE(WaitUntil([] { return LiveSlurmJobs().empty(); }, 30))
          << "Burst's jobs left in Slurm's queue after the suite:\n"
          << LiveSlurmJobs();
    }
    slurm_.reset();
    s3_.reset();
  }

 private:
  static std::string Env(const char* name) {
    const char* v = std::getenv(name);
    return v == nullptr ? "" : v;
  }
  std::unique_ptr<TestSlurm> slurm_;
  std::unique_ptr<S3TestService> s3_;
};

}  // namespace burst::e2e
