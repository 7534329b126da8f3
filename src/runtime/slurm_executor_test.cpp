// SlurmExecutor against a real Slurm (slurmctld + slurmd + munge from
// Debian), started for this test in a temporary folder by
// tests/slurm/slurm-up.sh, through both transports: the command-line tools
// and slurmrestd (with JWT authentication, started by the same script).
// The worker program is a small shell script that
// prints what the batch script gave it and waits for SIGTERM, so these
// tests look at Slurm and the executor alone; `burst serve --executor
// slurm` with real workers is the e2e suite's.
#include "runtime/slurm_executor.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "core/fs.h"
#include "core/subprocess.h"

namespace burst {
namespace {

namespace fs = std::filesystem;

std::string ReadAll(const fs::path& p) {
  std::ifstream f(p);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

// A value from slurm-up.sh's DIR/env ("NAME=value" lines).
std::string EnvFileValue(const fs::path& file, const std::string& name) {
  std::istringstream lines(ReadAll(file));
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind(name + "=", 0) == 0) return line.substr(name.size() + 1);
  }
  return "";
}

// The parameter: "cli" (sbatch, squeue, scancel) or "rest" (slurmrestd).
class SlurmExecutorTest : public ::testing::TestWithParam<std::string> {
 protected:
  static void SetUpTestSuite() {
    dir_ = new fs::path(MakeTempDir("burst-slurm-test"));
    const std::string up = std::string(BURST_SOURCE_DIR) + "/tests/slurm/slurm-up.sh";
    ::setenv("BURST_SLURM_REST_PORT", "6820", 1);  // slurmrestd too
    auto r = RunCommand({up, (*dir_ / "slurm").string()}, 60'000);
    ::unsetenv("BURST_SLURM_REST_PORT");
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    ASSERT_EQ(r.value().exit_code, 0) << r.value().out << r.value().err;
    ::setenv("SLURM_CONF", (*dir_ / "slurm" / "slurm.conf").c_str(), 1);
    rest_url_ = new std::string(EnvFileValue(*dir_ / "slurm" / "env", "BURST_TEST_SLURM_REST"));
    rest_token_ = new std::string(EnvFileValue(*dir_ / "slurm" / "env", "SLURM_JWT"));
    // The stand-in worker: says what it was given, exits 3 when its id says
    // "quick", else waits for SIGTERM.
    const fs::path exe = *dir_ / "fake-burst";
    std::ofstream(exe) << "#!/bin/sh\n"
                          "echo \"args=$* id=$BURST_WORKER_ID token=$BURST_WORKER_TOKEN threads=$BURST_THREADS "
                          "url=$BURST_URL dir=$BURST_WORKER_DIR cpus=$SLURM_JOB_CPUS_PER_NODE key=${BURST_API_KEY:-none}\"\n"
                          "case \"$BURST_WORKER_ID\" in *quick*) exit 3;; esac\n"
                          "trap 'echo got TERM; exit 0' TERM\n"
                          "while :; do sleep 0.1; done\n";
    fs::permissions(exe, fs::perms::owner_all);
  }
  static void TearDownTestSuite() {
    const std::string down = std::string(BURST_SOURCE_DIR) + "/tests/slurm/slurm-down.sh";
    (void)RunCommand({down, (*dir_ / "slurm").string()}, 60'000);  // best effort: the folder goes next
    std::error_code ec;
    fs::remove_all(*dir_, ec);
    delete dir_;
    delete rest_url_;
    delete rest_token_;
  }
  bool Rest() const { return GetParam() == "rest"; }

  SlurmExecutorOptions Options() const {
    SlurmExecutorOptions o;
    o.exe = (*dir_ / "fake-burst").string();
    o.url = "http://10.1.2.3:8470";
    o.log_dir = (*dir_ / ("logs-" + GetParam())).string();
    o.scratch_dir = "/tmp/burst-scratch";
    o.job_prefix = "bursttest-";
    o.poll_interval_ms = 200;
    if (Rest()) {
      o.rest_url = *rest_url_;
      o.rest_user = "root";
      o.rest_token = *rest_token_;
    }
    return o;
  }

  // Polls until `pred` holds (exits gathered into `exits`), at most 20 s.
  template <typename Pred>
  bool PollUntil(SlurmExecutor& ex, std::vector<WorkerExit>& exits, Pred pred) {
    for (int i = 0; i < 200; ++i) {
      for (auto& e : ex.Poll()) exits.push_back(e);
      if (pred()) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    return false;
  }

  static fs::path* dir_;
  static std::string *rest_url_, *rest_token_;
  SystemClock clock_;
};
fs::path* SlurmExecutorTest::dir_ = nullptr;
std::string* SlurmExecutorTest::rest_url_ = nullptr;
std::string* SlurmExecutorTest::rest_token_ = nullptr;
INSTANTIATE_TEST_SUITE_P(Transports, SlurmExecutorTest, ::testing::Values("cli", "rest"),
                         [](const auto& info) { return info.param; });

TEST_P(SlurmExecutorTest, AWorkerIsABatchJobThatStopsOnSigterm) {
  ASSERT_FALSE(rest_url_->empty() || rest_token_->empty()) << "slurm-up.sh started no slurmrestd";
  ::setenv("BURST_API_KEY", "sk-not-for-workers", 1);
  SlurmExecutor ex(clock_, Options());
  EXPECT_EQ(ex.Transport(), Rest() ? "slurmrestd at " + *rest_url_ : "sbatch");
  auto id = ex.Start({"wrk-a", "tok-a", 0, 2});
  ::unsetenv("BURST_API_KEY");
  ASSERT_TRUE(id.ok()) << id.status().ToString();
  EXPECT_GT(id.value(), 0);
  const fs::path log = *dir_ / ("logs-" + GetParam()) / "wrk-a.log";
  std::vector<WorkerExit> exits;
  ASSERT_TRUE(PollUntil(ex, exits, [&] { return ReadAll(log).find("id=") != std::string::npos; })) << ReadAll(log);
  EXPECT_TRUE(exits.empty()) << exits[0].how;
  const std::string said = ReadAll(log);
  EXPECT_NE(said.find("args=worker id=wrk-a token=tok-a threads=2 url=http://10.1.2.3:8470 "
                      "dir=/tmp/burst-scratch/wrk-a cpus=2 key=none"),
            std::string::npos)
      << said;
  // Listed under its name while it runs.
  auto q = RunCommand({"squeue", "--noheader", "--name=bursttest-wrk-a", "--format=%i %T"}, 10'000);
  ASSERT_TRUE(q.ok());
  EXPECT_EQ(q.value().out, std::to_string(id.value()) + " RUNNING\n");

  ex.Stop("wrk-a", 10'000);
  ASSERT_TRUE(PollUntil(ex, exits, [&] { return !exits.empty(); }));
  EXPECT_EQ(exits[0].worker_id, "wrk-a");
  EXPECT_EQ(exits[0].how, "slurm COMPLETED") << "SIGTERM reached the worker, which left by itself";
  EXPECT_NE(ReadAll(log).find("got TERM"), std::string::npos) << ReadAll(log);
  EXPECT_TRUE(ex.Poll().empty()) << "an exit is reported once";
}

TEST_P(SlurmExecutorTest, AFailedWorkerIsAnExitWithSlurmsState) {
  SlurmExecutor ex(clock_, Options());
  ASSERT_TRUE(ex.Start({"wrk-quick", "tok", 0, 1}).ok());
  std::vector<WorkerExit> exits;
  ASSERT_TRUE(PollUntil(ex, exits, [&] { return !exits.empty(); }));
  EXPECT_EQ(exits[0].how, "slurm FAILED");
}

TEST_P(SlurmExecutorTest, ARestartedControlPlaneAdoptsItsJobsByName) {
  std::vector<WorkerExit> exits;
  {
    SlurmExecutor first(clock_, Options());
    ASSERT_TRUE(first.Start({"wrk-b", "tok-b", 1, 1}).ok());
    ASSERT_TRUE(PollUntil(first, exits, [&] {
      return ReadAll(*dir_ / ("logs-" + GetParam()) / "wrk-b.log").find("id=wrk-b") != std::string::npos;
    }));
  }  // the control plane goes; its worker does not
  SlurmExecutor second(clock_, Options());
  EXPECT_FALSE(second.Adopt("wrk-never", 0));
  ASSERT_TRUE(second.Adopt("wrk-b", 0));
  EXPECT_TRUE(second.Poll().empty()) << "still running";
  second.Stop("wrk-b", 0);  // no grace: scancel at the next poll
  ASSERT_TRUE(PollUntil(second, exits, [&] { return !exits.empty(); }));
  EXPECT_EQ(exits[0].worker_id, "wrk-b");
  EXPECT_FALSE(second.Adopt("wrk-b", 0)) << "an ended job is not adopted";
}

TEST_P(SlurmExecutorTest, ARefusedSubmissionSaysWhatSlurmSaid) {
  SlurmExecutorOptions o = Options();
  o.partition = "no-such-partition";
  SlurmExecutor ex(clock_, o);
  auto id = ex.Start({"wrk-c", "tok", 0, 1});
  ASSERT_FALSE(id.ok());
  EXPECT_EQ(id.status().code(), Code::kUnavailable);
  EXPECT_NE(id.status().message().find(ex.Transport() + " refused worker wrk-c"), std::string::npos)
      << id.status().ToString();
  EXPECT_NE(id.status().message().find("partition"), std::string::npos) << id.status().ToString();
  EXPECT_TRUE(ex.Poll().empty());
}

// slurmrestd with a token it refuses, and one that is not there: clear
// errors naming it, and nothing submitted.
TEST_P(SlurmExecutorTest, AWrongTokenOrADeadSlurmrestdSaysSo) {
  if (!Rest()) GTEST_SKIP() << "slurmrestd only";
  SlurmExecutorOptions o = Options();
  o.rest_token = "not-a-token";
  SlurmExecutor bad_token(clock_, o);
  auto id = bad_token.Start({"wrk-d", "tok", 0, 1});
  ASSERT_FALSE(id.ok());
  EXPECT_EQ(id.status().code(), Code::kUnavailable);
  // (22.05 answers a token slurmctld refuses with HTTP 500, "Zero Bytes were transmitted or received".)
  EXPECT_NE(id.status().message().find("slurmrestd at " + *rest_url_ + " refused worker wrk-d: HTTP "),
            std::string::npos)
      << id.status().ToString();
  o = Options();
  o.rest_url = "http://127.0.0.1:1";
  SlurmExecutor dead(clock_, o);
  id = dead.Start({"wrk-e", "tok", 0, 1});
  ASSERT_FALSE(id.ok());
  EXPECT_NE(id.status().message().find("cannot reach slurmrestd at http://127.0.0.1:1"), std::string::npos)
      << id.status().ToString();
  auto q = RunCommand({"squeue", "--noheader", "--name=bursttest-wrk-d,bursttest-wrk-e"}, 10'000);
  ASSERT_TRUE(q.ok());
  EXPECT_EQ(q.value().out, "");
}

TEST(SlurmStates, EndedStates) {
  for (const char* s : {"COMPLETED", "FAILED", "CANCELLED", "CANCELLED by 0", "TIMEOUT", "NODE_FAIL", "PREEMPTED"})
    EXPECT_TRUE(SlurmStateEnded(s)) << s;
  for (const char* s : {"PENDING", "RUNNING", "COMPLETING", "CONFIGURING", "SUSPENDED", "REQUEUED"})
    EXPECT_FALSE(SlurmStateEnded(s)) << s;
}

}  // namespace
}  // namespace burst
