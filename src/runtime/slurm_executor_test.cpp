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
#include <optional>
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
    std::ofstream(exe)
        << "#!/bin/sh\n"
           "echo \"args=$* id=$BURST_WORKER_ID token=$BURST_WORKER_TOKEN threads=$BURST_THREADS "
           "url=$BURST_URL dir=$BURST_WORKER_DIR cpus=$SLURM_JOB_CPUS_PER_NODE key=${BURST_API_KEY:-none} "
           "device=$BURST_WORKER_DEVICE\"\n"
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
  ASSERT_TRUE(PollUntil(ex, exits, [&] { return ReadAll(log).find("id=") != std::string::npos; }))
      << ReadAll(log);
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

// slurm-up.sh's node has two GPUs of type h100 (GRES with empty device
// files): the partition's GPUs are read from Slurm, a GPU worker's job asks
// for its type and count, and a count the cluster cannot give is refused.
TEST_P(SlurmExecutorTest, GpuWorkersAskForTheirTypeOnAPartitionWhoseGpusAreRead) {
  SlurmExecutor ex(clock_, Options());
  auto gpus = ex.Gpus();
  ASSERT_TRUE(gpus.ok()) << gpus.status().ToString();
  EXPECT_EQ(DescribeGpus(gpus.value()), "2 x h100");
  SlurmExecutorOptions debug = Options();
  debug.partition = "debug";
  SlurmExecutor named(clock_, debug);
  EXPECT_EQ(named.Gpus().value().size(), 2u);
  SlurmExecutorOptions other = Options();
  other.partition = "nosuch";
  SlurmExecutor none(clock_, other);
  EXPECT_TRUE(none.Gpus().value().empty());

  ASSERT_TRUE(ex.Start({"wrk-gpu", "tok-g", -1, 1, "h100", {gpus.value()[0]}}).ok());
  const fs::path log = *dir_ / ("logs-" + GetParam()) / "wrk-gpu.log";
  std::vector<WorkerExit> exits;
  ASSERT_TRUE(PollUntil(ex, exits, [&] { return ReadAll(log).find("id=wrk-gpu") != std::string::npos; }))
      << ReadAll(log);
  EXPECT_NE(ReadAll(log).find("device=h100"), std::string::npos) << ReadAll(log);
  auto q = RunCommand({"squeue", "--noheader", "--name=bursttest-wrk-gpu", "--format=%b"}, 10'000);
  ASSERT_TRUE(q.ok());
  EXPECT_NE(q.value().out.find("gpu:h100:1"), std::string::npos) << q.value().out;
  ex.Stop("wrk-gpu", 0);
  ASSERT_TRUE(PollUntil(ex, exits, [&] { return !exits.empty(); }));
  // Three H100s: more than the cluster has.
  WorkerLaunch three("wrk-gpu3", "tok", -1, 1, "h100", {gpus.value()[0], gpus.value()[1], gpus.value()[1]});
  EXPECT_EQ(WorkerGres("", three), "gpu:h100:3");
  EXPECT_FALSE(ex.Start(three).ok());
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

// A gang's workers: one allocation whose job steps are the workers (the
// command-line tools), or one job each through slurmrestd, which shows no
// steps. A member stopped alone leaves the others running; a restarted
// control plane adopts a member by the allocation's comment.
TEST_P(SlurmExecutorTest, AGangIsOneAllocationWithAJobStepPerWorker) {
  const fs::path logs = *dir_ / ("logs-" + GetParam());
  std::vector<WorkerExit> exits;
  auto exited = [&](const std::string& id) {
    for (const WorkerExit& e : exits)
      if (e.worker_id == id) return true;
    return false;
  };
  auto said = [&](const std::string& id, const std::string& what) {
    return ReadAll(logs / (id + ".log")).find(what) != std::string::npos;
  };
  {
    SlurmExecutor first(clock_, Options());
    auto g = first.StartGroup({{"wrk-g1", "tok-g1", 0, 1}, {"wrk-g2", "tok-g2", 1, 1}});
    ASSERT_TRUE(g.ok()) << g.status().ToString();
    ASSERT_EQ(g.value().handles.size(), 2u);
    ASSERT_TRUE(
        PollUntil(first, exits, [&] { return said("wrk-g1", "id=wrk-g1") && said("wrk-g2", "id=wrk-g2"); }))
        << ReadAll(logs / "wrk-g1.log") << ReadAll(logs / "wrk-g2.log") << ReadAll(logs / "gang-wrk-g1.log");
    EXPECT_NE(ReadAll(logs / "wrk-g2.log")
                  .find("args=worker id=wrk-g2 token=tok-g2 threads=1 url=http://10.1.2.3:8470 "
                        "dir=/tmp/burst-scratch/wrk-g2"),
              std::string::npos)
        << ReadAll(logs / "wrk-g2.log");
    auto q = RunCommand({"squeue", "--noheader", "--format=%j %T %C"}, 10'000);
    ASSERT_TRUE(q.ok());
    if (Rest()) {
      EXPECT_NE(g.value().how.find("one Slurm job each (slurmrestd at"), std::string::npos) << g.value().how;
      EXPECT_NE(g.value().handles[0], g.value().handles[1]);
      EXPECT_NE(q.value().out.find("bursttest-wrk-g1 RUNNING 1"), std::string::npos) << q.value().out;
      EXPECT_NE(q.value().out.find("bursttest-wrk-g2 RUNNING 1"), std::string::npos) << q.value().out;
      first.Stop("wrk-g1", 10'000);
      first.Stop("wrk-g2", 10'000);
      ASSERT_TRUE(PollUntil(first, exits, [&] { return exited("wrk-g1") && exited("wrk-g2"); }));
      return;
    }
    EXPECT_EQ(g.value().how,
              "as one Slurm allocation (job " + std::to_string(g.value().handles[0]) + ", a job step each)");
    EXPECT_EQ(g.value().handles[0], g.value().handles[1]);
    EXPECT_EQ(q.value().out, "bursttest-gang-wrk-g1 RUNNING 2\n") << "one job holds both workers' CPUs";
    auto steps = RunCommand({"squeue", "--steps", "--noheader", "--format=%j"}, 10'000);
    ASSERT_TRUE(steps.ok());
    EXPECT_NE(steps.value().out.find("bursttest-wrk-g1\n"), std::string::npos) << steps.value().out;
    EXPECT_NE(steps.value().out.find("bursttest-wrk-g2\n"), std::string::npos) << steps.value().out;

    // One member stopped: its step ends, the other runs on.
    first.Stop("wrk-g1", 10'000);
    ASSERT_TRUE(PollUntil(first, exits, [&] { return exited("wrk-g1"); }));
    EXPECT_EQ(exits[0].how.rfind("slurm step " + std::to_string(g.value().handles[0]) + ".", 0), 0u)
        << exits[0].how;
    EXPECT_TRUE(said("wrk-g1", "got TERM"));
    EXPECT_FALSE(said("wrk-g2", "got TERM"));
    EXPECT_FALSE(exited("wrk-g2"));
  }  // the control plane goes; wrk-g2 does not
  SlurmExecutor second(clock_, Options());
  EXPECT_FALSE(second.Adopt("wrk-g1", 0)) << "its step ended";
  ASSERT_TRUE(second.Adopt("wrk-g2", 0)) << "found by its allocation's comment";
  exits.clear();
  for (int i = 0; i < 10; ++i) {  // a few listings: its step is still there
    for (auto& e : second.Poll()) exits.push_back(e);
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_TRUE(exits.empty()) << exits[0].how;
  // The last member stopped: the whole allocation is signalled and ends.
  second.Stop("wrk-g2", 10'000);
  ASSERT_TRUE(PollUntil(second, exits, [&] { return exited("wrk-g2"); }));
  EXPECT_TRUE(said("wrk-g2", "got TERM"));
  auto left = RunCommand({"squeue", "--noheader", "--name=bursttest-gang-wrk-g1", "--format=%T"}, 10'000);
  ASSERT_TRUE(left.ok());
  EXPECT_TRUE(left.value().out.empty() || left.value().out == "COMPLETING\n") << left.value().out;
}

// A gang Slurm cannot place is refused whole, naming its workers; one that
// waits for room is one pending job, cancelled whole when its members stop.
TEST_P(SlurmExecutorTest, AGangWaitsOrIsRefusedWholeAndAPendingOneIsCancelledWhole) {
  if (Rest()) GTEST_SKIP() << "one job each through slurmrestd: AGangIsOneAllocationWithAJobStepPerWorker";
  SlurmExecutorOptions o = Options();
  o.partition = "no-such-partition";
  SlurmExecutor nowhere(clock_, o);
  auto refused = nowhere.StartGroup({{"wrk-r1", "t", 0, 1}, {"wrk-r2", "t", 1, 1}});
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), Code::kUnavailable);
  EXPECT_NE(refused.status().message().find("sbatch refused the gang of workers wrk-r1 wrk-r2: "),
            std::string::npos)
      << refused.status().ToString();
  EXPECT_NE(refused.status().message().find("partition"), std::string::npos) << refused.status().ToString();
  EXPECT_TRUE(nowhere.Poll().empty());
  SlurmExecutor ex(clock_, Options());
  const int cpus = static_cast<int>(std::thread::hardware_concurrency());
  // The node taken by one worker: the gang waits, all of it.
  ASSERT_TRUE(ex.Start({"wrk-hog", "t", 0, cpus}).ok());
  std::vector<WorkerExit> exits;
  const fs::path hog_log = *dir_ / ("logs-" + GetParam()) / "wrk-hog.log";
  ASSERT_TRUE(PollUntil(ex, exits, [&] { return ReadAll(hog_log).find("id=wrk-hog") != std::string::npos; }));
  auto g = ex.StartGroup({{"wrk-p1", "t", 1, 1}, {"wrk-p2", "t", 2, 1}});
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  auto state = [] {
    auto q = RunCommand({"squeue", "--noheader", "--name=bursttest-gang-wrk-p1", "--format=%T"}, 10'000);
    return q.ok() ? q.value().out : q.status().ToString();
  };
  ASSERT_TRUE(PollUntil(ex, exits, [&] { return state() == "PENDING\n"; })) << state();
  for (int i = 0; i < 5; ++i) {
    for (auto& e : ex.Poll()) exits.push_back(e);
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_TRUE(exits.empty()) << "waiting is no exit";
  ex.Stop("wrk-p1", 0);
  ex.Stop("wrk-p2", 0);
  ex.Stop("wrk-hog", 10'000);
  ASSERT_TRUE(PollUntil(ex, exits, [&] { return exits.size() == 3; }));
  for (const WorkerExit& e : exits) {
    if (e.worker_id == "wrk-hog") {
      EXPECT_EQ(e.how, "slurm COMPLETED") << ReadAll(hog_log);
      continue;
    }
    EXPECT_EQ(e.how.rfind("slurm CANCELLED", 0), 0u) << e.worker_id << ": " << e.how;
  }
}

// The gang's batch script: each worker a step with its own identity, the
// slot's CPUs, its share of memory (--slurm-mem-mb is per worker) and its
// own log; the shell outlives a TERM aimed at it and waits for every step.
TEST(SlurmGangScript, EachWorkerIsAStepOfItsOwn) {
  SystemClock clock;
  SlurmExecutorOptions o;
  o.exe = "/opt/burst/burst";
  o.url = "http://cp:8470";
  o.log_dir = MakeTempDir("burst-slurm-script").string();
  o.scratch_dir = "/scratch";
  o.mem_mb = 3001;
  o.env = {{"AWS_ACCESS_KEY_ID", "key"}};
  SlurmExecutor ex(clock, o);
  const std::string s = ex.GroupScript({{"wrk-a", "tok-a", 0, 2}, {"wrk-b", "tok'b", 1, 2}});
  for (const std::string& want :
       {std::string("export BURST_URL='http://cp:8470'\n"), std::string("export AWS_ACCESS_KEY_ID='key'\n"),
        std::string("trap ':' TERM INT\n"),
        "BURST_WORKER_ID='wrk-a' BURST_WORKER_TOKEN='tok-a' BURST_WORKER_DIR='/scratch/wrk-a' "
        "BURST_THREADS=2 BURST_WORKER_DEVICE='cpu' CUDA_VISIBLE_DEVICES='' \\\n"
        "  srun --export=ALL --nodes=1 --ntasks=1 --cpus-per-task=2 --exact --mem-per-cpu=1501 "
        "--job-name='burst-wrk-a' --output='" +
            o.log_dir +
            "/wrk-a.log' --open-mode=append \\\n"
            "  '/opt/burst/burst' worker &\n",
        std::string("BURST_WORKER_TOKEN='tok'\\''b'"), std::string("--job-name='burst-wrk-b'")}) {
    EXPECT_NE(s.find(want), std::string::npos) << want << "\nnot in\n" << s;
  }
  EXPECT_EQ(s.substr(s.size() - 23), "until wait; do :; done\n");
  std::error_code ec;
  fs::remove_all(o.log_dir, ec);
}

// Slurm's workers run with --export=NONE, local ones inherit the control
// plane's environment: the variables that choose numeric kernels
// (kNumericsEnv) go into every script from burst serve's environment, so a
// job computes the same bytes on either; a value --worker-env gives wins,
// and thread counts (Burst's own, per slot) stay out.
TEST(SlurmScript, TheServersNumericKernelsGoWithEveryWorker) {
  const std::vector<std::string> names = {"OPENBLAS_CORETYPE", "ATEN_CPU_CAPABILITY", "OPENBLAS_NUM_THREADS",
                                          "MKL_CBWR"};
  std::vector<std::optional<std::string>> saved;  // this process's own, put back after
  for (const std::string& n : names) {
    const char* v = std::getenv(n.c_str());
    saved.push_back(v != nullptr ? std::optional<std::string>(v) : std::nullopt);
  }
  ::setenv("OPENBLAS_CORETYPE", "Haswell", 1);
  ::setenv("ATEN_CPU_CAPABILITY", "avx2", 1);
  ::setenv("OPENBLAS_NUM_THREADS", "7", 1);
  ::unsetenv("MKL_CBWR");
  SystemClock clock;
  SlurmExecutorOptions o;
  o.exe = "/opt/burst/burst";
  o.url = "http://cp:8470";
  o.log_dir = MakeTempDir("burst-slurm-script").string();
  o.scratch_dir = "/scratch";
  o.env = {{"ATEN_CPU_CAPABILITY", "default"}};  // --worker-env ATEN_CPU_CAPABILITY=default
  SlurmExecutor ex(clock, o);
  for (size_t i = 0; i < names.size(); ++i) {
    if (saved[i]) {
      ::setenv(names[i].c_str(), saved[i]->c_str(), 1);
    } else {
      ::unsetenv(names[i].c_str());
    }
  }
  const std::string one = ex.Script({"wrk-a", "tok-a", 0, 2});
  const std::string gang = ex.GroupScript({{"wrk-a", "tok-a", 0, 2}, {"wrk-b", "tok-b", 1, 2}});
  for (const std::string& s : {one, gang}) {
    EXPECT_NE(s.find("export OPENBLAS_CORETYPE='Haswell'\n"), std::string::npos) << s;
    EXPECT_NE(s.find("export ATEN_CPU_CAPABILITY='default'\n"), std::string::npos) << s;
    EXPECT_EQ(s.find("avx2"), std::string::npos) << "--worker-env's value wins\n" << s;
    EXPECT_EQ(s.find("OPENBLAS_NUM_THREADS"), std::string::npos) << "a thread count is the slot's\n" << s;
    EXPECT_EQ(s.find("MKL_CBWR"), std::string::npos) << "unset here, unset there\n" << s;
    EXPECT_LT(s.find("export OPENBLAS_CORETYPE="), s.find("/opt/burst/burst' worker"))
        << "set before the worker starts\n"
        << s;
  }
  std::error_code ec;
  fs::remove_all(o.log_dir, ec);
}

TEST(SlurmStates, EndedStates) {
  for (const char* s :
       {"COMPLETED", "FAILED", "CANCELLED", "CANCELLED by 0", "TIMEOUT", "NODE_FAIL", "PREEMPTED"})
    EXPECT_TRUE(SlurmStateEnded(s)) << s;
  for (const char* s : {"PENDING", "RUNNING", "COMPLETING", "CONFIGURING", "SUSPENDED", "REQUEUED"})
    EXPECT_FALSE(SlurmStateEnded(s)) << s;
}

}  // namespace
}  // namespace burst
