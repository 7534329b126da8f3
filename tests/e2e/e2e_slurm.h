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
#include "e2e_util.h"

extern char** environ;

namespace burst::e2e {

// Burst's jobs in Slurm's queue that have not ended, one "name STATE" a line.
inline std::string LiveSlurmJobs() {
  auto r = RunCommand({"squeue", "--noheader", "--format=%j %T"}, 10'000);
  return r.ok() ? r.value().out : "(squeue: " + r.status().ToString() + ")";
}

// Slurm's workers run with --export=NONE: the variables that choose
// OpenBLAS's kernels (and so the exact bytes) go with them as --worker-env,
// so both executors compute with the same kernels.
inline std::vector<std::string> WorkerEnvFlags() {
  std::vector<std::string> flags;
  for (char** e = environ; *e != nullptr; ++e) {
    std::string kv = *e;
    if (kv.rfind("OPENBLAS_", 0) == 0 || kv.rfind("OMP_", 0) == 0) flags.insert(flags.end(), {"--worker-env", kv});
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
    if (rest_port > 0 && (rest_url_.empty() || rest_token_.empty())) return "slurm-up.sh started no slurmrestd";
    return "";
  }

  const fs::path& dir() const { return dir_.path(); }  // for the test's own files too
  fs::path conf_dir() const { return dir_.path() / "slurm"; }  // slurm.conf, logs, pid files
  std::string slurmd_pid() const { return Slurp(conf_dir() / "slurmd.pid"); }
  const std::string& rest_url() const { return rest_url_; }
  const std::string& rest_token() const { return rest_token_; }

 private:
  TempDir dir_{"burst-e2e-slurm"};
  bool started_ = false;
  std::string rest_url_, rest_token_;
};

// The executor the jobs and deployments suites run on: the local one, or,
// with BURST_E2E_EXECUTOR=slurm (CTest's e2e_*_on_slurm entries), workers
// as Slurm batch jobs on a single-node Slurm started for the test binary.
// Those workers share the control plane's folders (a shared path, as on a
// cluster with a shared filesystem; e2e_slurm_test covers workers that see
// none of them), and a signal sent to a worker's pid reaches it as on a
// node. Register it with ::testing::AddGlobalTestEnvironment.
class E2eExecutor : public ::testing::Environment {
 public:
  static bool OnSlurm() {
    const char* e = std::getenv("BURST_E2E_EXECUTOR");
    return e != nullptr && std::string(e) == "slurm";
  }
  // `flags` with the executor's own added.
  static std::vector<std::string> With(std::vector<std::string> flags) {
    if (!OnSlurm()) return flags;
    flags.insert(flags.end(), {"--executor", "slurm"});
    for (const std::string& f : WorkerEnvFlags()) flags.push_back(f);
    return flags;
  }
  void SetUp() override {
    const char* e = std::getenv("BURST_E2E_EXECUTOR");
    ASSERT_TRUE(e == nullptr || OnSlurm() || std::string(e) == "local")
        << "BURST_E2E_EXECUTOR must be local or slurm, not " << e;
    if (!OnSlurm()) return;
    slurm_ = std::make_unique<TestSlurm>();
    const std::string failed = slurm_->Start();
    ASSERT_TRUE(failed.empty()) << failed;
    std::printf("[e2e] workers run as Slurm jobs (SLURM_CONF=%s)\n", std::getenv("SLURM_CONF"));
  }
  void TearDown() override {
    if (slurm_) {
      EXPECT_TRUE(WaitUntil([] { return LiveSlurmJobs().empty(); }, 30))
          << "Burst's jobs left in Slurm's queue after the suite:\n" << LiveSlurmJobs();
    }
    slurm_.reset();
  }

 private:
  std::unique_ptr<TestSlurm> slurm_;
};

}  // namespace burst::e2e
