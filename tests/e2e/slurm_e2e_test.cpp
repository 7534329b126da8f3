// `burst serve --executor slurm` against a real single-node Slurm that this
// test starts (tests/slurm/slurm-up.sh): the pool scales from zero with
// real `burst worker`s running as Slurm batch jobs (submitted through
// slurmrestd), a job trains to the same bytes as on the local executor, and
// the pool (and Slurm's queue) goes back to zero. With an s3:// store on a real radosgw (tests/s3/):
// scancel of the worker mid-job, and a node that dies, still end with the
// same bytes, read back from the bucket with curl; and a deployment scales
// from zero to a replica on Slurm and back. Workers there see none of the
// control plane's folders (BlindWorkerExe): the base model comes from the
// bucket. A worker near its Slurm time limit is warned (--signal), preempts
// and its task resumes on the next one.
#include <gtest/gtest.h>
#include <httplib.h>

#include <cstdlib>
#include <map>

#include "core/fs.h"
#include "core/subprocess.h"
#include "e2e_cluster.h"
#include "e2e_http.h"
#include "store/s3_test_service.h"

namespace burst::e2e {
namespace {

const std::vector<std::string> kFlags = {
    "--slots", "1", "--threads-per-slot", "1", "--scaledown-window", "2", "--lease-ttl", "5"};
constexpr int64_t kSteps = 6;

// The fault tests' job is longer, so a signal lands mid-job.
constexpr int64_t kFaultSteps = 24;

Json Spec(const std::string& file, int64_t steps = kSteps) {
  return {
      {"model", "burst-small"},
      {"training_file", file},
      {"seed", 11},
      {"recipe", {{"max_steps", steps}, {"batch_size", 4}, {"checkpoint_every", 3}, {"max_seq_len", 128}}}};
}

// Submits the spec, waits for the job to end; the job, or null.
Json RunJob(const ServeProcess& s, const std::string& file, const std::function<void()>& while_running = {},
            int64_t steps = kSteps) {
  Resp created = s.Send("POST", "/v1/fine_tuning/jobs", Spec(file, steps));
  EXPECT_EQ(created.status, 200) << created.Describe();
  if (created.status != 200) return Json();
  const std::string id = created.body["id"];
  bool saw_running = false;
  Json job;
  WaitUntil(
      [&] {
        job = s.Send("GET", "/v1/fine_tuning/jobs/" + id).body;
        const std::string st = job.value("status", "");
        if (st == "running" && !saw_running && while_running) {
          saw_running = true;
          while_running();
        }
        return st == "succeeded" || st == "failed" || st == "cancelled";
      },
      300, 200);
  return job;
}

// Uploads the support data and submits Spec(file, steps) with
// `checkpoint_every` (and `epochs`, when given: one epoch is 300 steps);
// the job's id, "" (with a failure) when either fails.
std::string SubmitSupportJob(const ServeProcess& s, int64_t steps, int64_t checkpoint_every = 3,
                             int64_t epochs = 0) {
  const std::string file = s.Upload(SupportTrain());
  EXPECT_FALSE(file.empty()) << s.Output();
  if (file.empty()) return "";
  Json spec = Spec(file, steps);
  spec["recipe"]["checkpoint_every"] = checkpoint_every;
  if (epochs > 0) spec["recipe"]["epochs"] = epochs;
  Resp created = s.Send("POST", "/v1/fine_tuning/jobs", spec);
  EXPECT_EQ(created.status, 200) << created.Describe();
  return created.status == 200 ? created.body.value("id", "") : "";
}

// Waits for job `id` to succeed or fail (5 minutes at most); the job.
Json WaitEnded(const ServeProcess& s, const std::string& id) {
  Json job;
  WaitUntil(
      [&] {
        job = s.Send("GET", "/v1/fine_tuning/jobs/" + id).body;
        return job.value("status", "") == "succeeded" || job.value("status", "") == "failed";
      },
      300, 200);
  return job;
}

// Each attempt's outcome, in order ("running" for one that has none yet).
std::vector<std::string> Outcomes(const Json& job) {
  std::vector<std::string> out;
  for (const Json& a : job.value("attempts", Json::array()))
    out.push_back(a["outcome"].is_string() ? a["outcome"].get<std::string>() : "running");
  return out;
}

std::string AdapterKey(const Json& job) {
  char step[32];
  std::snprintf(step, sizeof(step), "step-%08lld", static_cast<long long>(job.value("step", int64_t{0})));
  return "orgs/" + job["organization_id"].get<std::string>() + "/jobs/" + job["id"].get<std::string>() +
         "/checkpoints/" + step + "/sampler/adapter_model.safetensors";
}

std::string AdapterSha(const ServeProcess& s, const Json& job) {
  const fs::path f = s.dir() / "data" / "store" / "objects" / AdapterKey(job);
  return fs::is_regular_file(f) ? Sha256File(f) : "(missing " + f.string() + ")";
}

// The adapter as the bucket holds it, fetched with curl (its own SigV4).
std::string S3AdapterSha(const std::string& prefix, const Json& job) {
  return BucketObjectSha(prefix + "/" + AdapterKey(job));
}

class SlurmE2eTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    slurm_ = new TestSlurm();
    const std::string failed = slurm_->Start(6821);  // slurmrestd too
    ASSERT_TRUE(failed.empty()) << failed;
    s3_ = new S3TestService();
    Status s = s3_->Start(7680);
    ASSERT_TRUE(s.ok()) << s.ToString();
  }
  static void TearDownTestSuite() {
    delete s3_;
    delete slurm_;
  }
  // The local executor's adapter for Spec(file, steps), on the embedded defaults.
  static std::string Reference(int64_t steps = kSteps) {
    static std::map<int64_t, std::string> shas;
    if (shas[steps].empty()) {
      ServeProcess local("burst-e2e-slurm-local", kFlags);
      EXPECT_TRUE(local.error().empty()) << local.error();
      Json job = RunJob(local, local.Upload(SupportTrain()), {}, steps);
      EXPECT_EQ(job.value("status", ""), "succeeded") << job.dump() << local.Output();
      shas[steps] = AdapterSha(local, job);
    }
    return shas[steps];
  }
  // `burst serve --executor slurm --store s3://burst-test/PREFIX`.
  static std::vector<std::string> S3Flags(const std::string& prefix) {
    std::vector<std::string> flags = kFlags;
    flags.insert(flags.end(), {"--executor", "slurm", "--store", "s3://burst-test/" + prefix, "--s3-endpoint",
                               std::getenv("BURST_TEST_S3_ENDPOINT")});
    for (const std::string& f : WorkerEnvFlags()) flags.push_back(f);
    return flags;
  }

  static TestSlurm* slurm_;
  static S3TestService* s3_;
};
TestSlurm* SlurmE2eTest::slurm_ = nullptr;
S3TestService* SlurmE2eTest::s3_ = nullptr;

// Through slurmrestd (JWT): the other tests here use sbatch, squeue and scancel.
TEST_F(SlurmE2eTest, AJobRunsOnSlurmWorkersToTheSameBytesAndThePoolGoesToZero) {
  // The reference: the same job on the local executor.
  const std::string local_sha = Reference();
  ASSERT_EQ(local_sha.size(), 64u) << local_sha;
  ASSERT_FALSE(slurm_->rest_url().empty() || slurm_->rest_token().empty())
      << "slurm-up.sh started no slurmrestd";

  std::vector<std::string> flags = kFlags;
  flags.insert(flags.end(), {"--executor", "slurm", "--slurm-rest", slurm_->rest_url()});
  for (const std::string& f : WorkerEnvFlags()) flags.push_back(f);
  ::setenv("SLURM_JWT", slurm_->rest_token().c_str(), 1);  // as an operator gives it
  ServeProcess s("burst-e2e-slurm-serve", flags);
  ::unsetenv("SLURM_JWT");
  ASSERT_TRUE(s.error().empty()) << s.error();
  EXPECT_NE(s.Output().find("workers run as Slurm jobs (through slurmrestd at " + slurm_->rest_url() +
                            "; a gang is one job per worker: slurmrestd at " + slurm_->rest_url() +
                            " shows no job steps)"),
            std::string::npos)
      << s.Output();
  EXPECT_EQ(LiveSlurmJobs(), "") << "nothing runs before there is work";
  const std::string file = s.Upload(SupportTrain());
  ASSERT_FALSE(file.empty());

  std::string during, workers_during;
  Json job = RunJob(s, file, [&] {
    during = LiveSlurmJobs();
    workers_during = s.Send("GET", "/v1/workers").raw;
  });
  ASSERT_EQ(job.value("status", ""), "succeeded") << job.dump() << s.Output();
  EXPECT_NE(during.find("burst-wrk-"), std::string::npos) << during;
  EXPECT_NE(during.find("RUNNING"), std::string::npos) << during;
  EXPECT_NE(workers_during.find("wrk-"), std::string::npos) << workers_during;
  EXPECT_EQ(AdapterSha(s, job), local_sha) << "the same bytes as on the local executor";

  // Back to zero: no worker in the pool and no Burst job left in Slurm.
  EXPECT_TRUE(
      WaitUntil([&] { return s.Send("GET", "/v1/workers").body.value("data", Json::array()).empty(); }, 60))
      << s.Send("GET", "/v1/workers").raw;
  EXPECT_TRUE(WaitUntil([&] { return LiveSlurmJobs().empty(); }, 30)) << LiveSlurmJobs();
}

// The variables that choose numeric kernels reach Slurm workers from burst
// serve's own environment, with no --worker-env (they run with
// --export=NONE; local workers inherit them): with ATEN_CPU_CAPABILITY set
// there to libtorch's plainest kernels (any x86-64 runs them; not those it
// would choose here), a job on a Slurm worker computes with them and ends
// with the local executor's bytes.
TEST_F(SlurmE2eTest, ServesKernelChoiceReachesSlurmWorkersAndTheBytesMatchLocalOnes) {
  constexpr const char* kVariable = "ATEN_CPU_CAPABILITY";
  const char* before = std::getenv(kVariable);
  const std::string saved = before != nullptr ? before : "";
  ASSERT_EQ(::setenv(kVariable, "default", 1), 0);
  std::string local_sha, slurm_sha, output, events;
  {
    ServeProcess local("burst-e2e-slurm-kernels-local", kFlags);
    EXPECT_TRUE(local.error().empty()) << local.error();
    Json job = RunJob(local, local.Upload(SupportTrain()));
    EXPECT_EQ(job.value("status", ""), "succeeded") << job.dump() << local.Output();
    local_sha = AdapterSha(local, job);
  }
  {
    std::vector<std::string> flags = kFlags;
    flags.insert(flags.end(), {"--executor", "slurm"});
    const std::vector<std::string> env = WorkerEnvFlags();  // the test's other settings, as the other tests
    for (size_t i = 0; i + 1 < env.size(); i += 2) {
      if (env[i + 1].rfind(std::string(kVariable) + "=", 0) != 0)
        flags.insert(flags.end(), {env[i], env[i + 1]});
    }
    ServeProcess s("burst-e2e-slurm-kernels", flags);
    EXPECT_TRUE(s.error().empty()) << s.error();
    Json job = RunJob(s, s.Upload(SupportTrain()));
    EXPECT_EQ(job.value("status", ""), "succeeded") << job.dump() << s.Output();
    slurm_sha = AdapterSha(s, job);
    output = s.Output();
    events = job.is_object()
                 ? s.Send("GET", "/v1/fine_tuning/jobs/" + job.value("id", "") + "/events?limit=100").raw
                 : "";
  }
  if (before != nullptr) {
    ::setenv(kVariable, saved.c_str(), 1);
  } else {
    ::unsetenv(kVariable);
  }
  EXPECT_NE(output.find("workers compute with ATEN_CPU_CAPABILITY=default from this server's environment"),
            std::string::npos)
      << output;
  EXPECT_NE(events.find("DEFAULT kernels"), std::string::npos)
      << "the Slurm worker said what it computed with\n"
      << events;
  ASSERT_EQ(local_sha.size(), 64u) << local_sha;
  EXPECT_EQ(slurm_sha, local_sha) << "the same bytes on a Slurm worker as on a local one";
  EXPECT_NE(local_sha, Reference())
      << "the plainest kernels give other bytes than this CPU's own: else this test "
         "could not tell a forwarded choice from none";
}

// scancel of a busy worker: Slurm sends it SIGTERM, it writes a state
// checkpoint to the bucket, the attempt ends as preempted and the next one
// resumes from it, to the reference's bytes; nothing goes to the local folder.
// The workers see none of the control plane's folders (BlindWorkerExe): the
// base model reaches them through the bucket.
TEST_F(SlurmE2eTest, OnS3AScancelledWorkerIsPreemptedAndTheJobEndsWithTheSameBytes) {
  const std::string ref = Reference(kFaultSteps);
  ASSERT_EQ(ref.size(), 64u) << ref;
  const std::string prefix = "e2e-" + std::to_string(::getpid()) + "-scancel";
  std::vector<std::string> flags = S3Flags(prefix);
  flags.insert(flags.end(), {"--worker-exe", BlindWorkerExe(slurm_->dir())});
  ServeProcess s("burst-e2e-slurm-s3", flags);
  ASSERT_TRUE(s.error().empty()) << s.error();
  // The store line follows "active", which the leader election may print
  // first from its own thread: wait for it rather than read once.
  EXPECT_TRUE(WaitUntil(
      [&] { return s.Output().find("store s3://burst-test/" + prefix + "?endpoint=") != std::string::npos; },
      10))
      << s.Output();
  const std::string id = SubmitSupportJob(s, kFaultSteps);
  ASSERT_FALSE(id.empty());
  // Once step 1 is in, scancel the worker's Slurm job.
  Json w;
  ASSERT_TRUE(WaitUntil(
      [&] {
        Json job = s.Send("GET", "/v1/fine_tuning/jobs/" + id).body;
        w = WorkerOf(s, id);
        return job.value("step", 0) >= 1 && w.is_object();
      },
      120, 50))
      << s.Send("GET", "/v1/fine_tuning/jobs/" + id).raw;
  ASSERT_LT(s.Send("GET", "/v1/fine_tuning/jobs/" + id).body.value("step", 0), kFaultSteps - 6)
      << "too late to preempt";
  // The worker's Slurm job is named burst-<worker id> (its "pid" is its process on the node).
  auto cancel = RunCommand({"scancel", "--name=burst-" + w["id"].get<std::string>()}, 10'000);
  ASSERT_TRUE(cancel.ok() && cancel.value().exit_code == 0) << (cancel.ok() ? cancel.value().err : "");

  const Json job = WaitEnded(s, id);
  ASSERT_EQ(job.value("status", ""), "succeeded") << job.dump() << s.Output();
  const std::vector<std::string> outcomes = Outcomes(job);
  EXPECT_EQ(outcomes, (std::vector<std::string>{"preempted", "completed"}))
      << job.dump() << "\nworker " << w.dump() << "\n"
      << s.Output();
  EXPECT_NE(job["attempts"][1]["worker"], w["id"]);
  // Each attempt ran on a worker started for it: its Slurm queue time and
  // start-up are reported apart from training.
  for (const Json& at : job["attempts"]) {
    EXPECT_GE(at.value("queued_s", -1.0), 0.0) << at.dump();
    EXPECT_GT(at.value("startup_s", 0.0), 0.0) << at.dump();
    EXPECT_LT(at.value("queued_s", 0.0) + at.value("startup_s", 0.0), 120.0) << at.dump();
  }
  EXPECT_EQ(S3AdapterSha(prefix, job), ref)
      << "the same bytes as an undisturbed run on the embedded defaults";
  EXPECT_FALSE(fs::exists(s.dir() / "data" / "store" / "objects" / AdapterKey(job)))
      << "written to the bucket only";
  // Each attempt's blind worker fetched the base model from the bucket, and
  // the adapter names it by its catalog name (portable, no server folder).
  const std::string events = s.Send("GET", "/v1/fine_tuning/jobs/" + id + "/events?order=asc&limit=1000").raw;
  size_t fetches = 0;
  for (size_t p = 0;
       (p = events.find("fetched base model burst-small from the store", p)) != std::string::npos; ++p) {
    ++fetches;
  }
  EXPECT_EQ(fetches, 2u) << events;
  const std::string config_key =
      AdapterKey(job).substr(0, AdapterKey(job).rfind('/')) + "/adapter_config.json";
  std::string why;
  auto config = BucketObject(prefix + "/" + config_key, &why);
  ASSERT_TRUE(config) << why;
  EXPECT_EQ(Json::parse(*config).value("base_model_name_or_path", ""), "burst-small");
  EXPECT_TRUE(WaitUntil([&] { return LiveSlurmJobs().empty(); }, 60)) << LiveSlurmJobs();
}

// The deployments suite's shape on Slurm: a checkpoint trained on blind
// Slurm workers is sampled pinned, then deployed with zero replicas; the
// first call starts a replica as a Slurm job (base model and checkpoint
// from the bucket) and answers as the pinned call did; idle past the
// window, the deployment and Slurm's queue go back to zero.
TEST_F(SlurmE2eTest, OnS3ADeploymentScalesFromZeroOnSlurmWorkersAndBack) {
  const std::string prefix = "e2e-" + std::to_string(::getpid()) + "-deploy";
  std::vector<std::string> flags = S3Flags(prefix);
  flags.insert(flags.end(), {"--worker-exe", BlindWorkerExe(slurm_->dir())});
  ServeProcess s("burst-e2e-slurm-deploy", flags);
  ASSERT_TRUE(s.error().empty()) << s.error();
  const std::string file = s.Upload(SupportTrain());
  ASSERT_FALSE(file.empty());
  Json job = RunJob(s, file);
  ASSERT_EQ(job.value("status", ""), "succeeded") << job.dump() << s.Output();
  const std::string checkpoint = job["id"].get<std::string>() + ":step-" + std::to_string(kSteps);
  auto chat = [&](const std::string& model) {
    return s.Send("POST", "/v1/chat/completions",
                  {{"model", model},
                   {"messages", {{{"role", "user"}, {"content", "My order has not arrived. Where is it?"}}}},
                   {"temperature", 0},
                   {"max_tokens", 8}});
  };
  Resp pinned = chat(checkpoint);
  ASSERT_EQ(pinned.status, 200) << pinned.Describe() << s.Output();
  ASSERT_TRUE(WaitUntil([&] { return LiveSlurmJobs().empty(); }, 60)) << LiveSlurmJobs();

  Resp created = s.Send("POST", "/v1/deployments",
                        {{"name", "support-bot"},
                         {"checkpoint", checkpoint},
                         {"min_replicas", 0},
                         {"max_replicas", 1},
                         {"scaledown_window_s", 2},
                         {"scope", "dedicated"}});
  ASSERT_EQ(created.status, 200) << created.Describe();
  EXPECT_EQ(LiveSlurmJobs(), "") << "min_replicas 0 starts nothing";
  Resp first = chat("support-bot");
  ASSERT_EQ(first.status, 200) << first.Describe() << s.Output();
  EXPECT_EQ(first.body["burst"]["cold_start"], true) << first.raw;
  EXPECT_EQ(first.body["choices"][0]["message"]["content"], pinned.body["choices"][0]["message"]["content"]);
  EXPECT_TRUE(WaitUntil(
      [&] { return s.Send("GET", "/v1/deployments/support-bot").body.value("replicas", -1) == 0; }, 30))
      << s.Send("GET", "/v1/deployments/support-bot").raw;
  EXPECT_TRUE(WaitUntil([&] { return LiveSlurmJobs().empty(); }, 60)) << LiveSlurmJobs();
  Resp del = s.Send("DELETE", "/v1/deployments/support-bot");
  EXPECT_EQ(del.status, 200) << del.Describe();
}

// Slurm's warning before a time limit (sbatch --signal=B:TERM@120, which
// burst serve asks for by default): a worker whose Slurm job nears its limit
// gets SIGTERM from Slurm ahead of it, writes a state checkpoint, and the
// task is requeued at once as preempted and resumed by the next worker. The
// limit is set on the running job (scontrol update TimeLimit=1: a minute,
// inside the 120 s window), so Slurm warns at its next time-limit check
// and the worker leaves before the limit; the job is cancelled
// once its resumption is seen.
TEST_F(SlurmE2eTest, AWorkerNearItsTimeLimitIsWarnedAndTheTaskResumesElsewhere) {
  std::vector<std::string> flags = kFlags;
  flags.insert(flags.end(), {"--executor", "slurm"});
  for (const std::string& f : WorkerEnvFlags()) flags.push_back(f);
  ServeProcess s("burst-e2e-slurm-limit", flags);
  ASSERT_TRUE(s.error().empty()) << s.error();
  // The only state checkpoint is the preemption's. Long enough (5000 steps,
  // not one epoch's 300, ~30 s on a fast node) to outlast Slurm's next
  // time-limit check, which comes up to a minute later.
  const std::string id = SubmitSupportJob(s, 5000, /*checkpoint_every=*/5000, /*epochs=*/20);
  ASSERT_FALSE(id.empty());
  auto job = [&] { return s.Send("GET", "/v1/fine_tuning/jobs/" + id).body; };
  Json w;
  ASSERT_TRUE(WaitUntil(
      [&] {
        w = WorkerOf(s, id);
        return job().value("step", 0) >= 1 && w.is_object();
      },
      120, 50))
      << job().dump();
  auto slurm_id = RunCommand(
      {"squeue", "--noheader", "--format=%i", "--name=burst-" + w["id"].get<std::string>()}, 10'000);
  ASSERT_TRUE(slurm_id.ok() && !Trim(slurm_id.value().out).empty()) << LiveSlurmJobs();
  const std::string sid = Trim(slurm_id.value().out);
  auto limit = RunCommand({"scontrol", "update", "JobId=" + sid, "TimeLimit=1"}, 10'000);
  ASSERT_TRUE(limit.ok() && limit.value().exit_code == 0) << (limit.ok() ? limit.value().err : "");
  const auto limited = std::chrono::steady_clock::now();

  ASSERT_TRUE(WaitUntil(
      [&] {
        return Outcomes(job()) == std::vector<std::string>{"preempted", "running"};
      },
      90, 200))
      << job().dump() << s.Output();
  const double warned_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - limited).count();
  EXPECT_LT(warned_s, 60.0) << "the worker left after its limit, not warned before it";
  auto state = RunCommand({"squeue", "--noheader", "--states=all", "--format=%T", "--jobs=" + sid}, 10'000);
  ASSERT_TRUE(state.ok()) << state.status().ToString();
  const std::string slurm_state = Trim(state.value().out);  // ended jobs stay listed (MinJobAge=300)
  ASSERT_FALSE(slurm_state.empty()) << "Slurm no longer lists job " << sid;
  EXPECT_EQ(slurm_state.rfind("TIMEOUT", 0), std::string::npos)
      << "Slurm timed the worker out: " << slurm_state;
  // The next worker resumes from the preemption's state checkpoint.
  Json resumed;
  ASSERT_TRUE(WaitUntil(
      [&] {
        resumed = job();
        const Json a = resumed.value("attempts", Json::array());
        return a.size() == 2 && a[1].value("resumed_from_step", int64_t{0}) > 0 &&
               resumed.value("status", "") == "running";
      },
      120, 200))
      << resumed.dump() << s.Output();
  EXPECT_NE(resumed["attempts"][1]["worker"], w["id"]);
  EXPECT_EQ(resumed.value("error", Json()), Json()) << "a preemption costs no retry and is no error";
  Resp cancel = s.Send("POST", "/v1/fine_tuning/jobs/" + id + "/cancel", Json::object());
  EXPECT_EQ(cancel.status, 200) << cancel.Describe();
  EXPECT_TRUE(WaitUntil([&] { return LiveSlurmJobs().empty(); }, 60)) << LiveSlurmJobs();
}

// A node that dies mid-job: kill -9 of slurmd, of the job's slurmstepd and
// of the worker, all at once, as a crashed machine leaves them. The worker's
// lease lapses, the attempt is lost and requeued; when the node comes back
// the next attempt resumes from the newest state checkpoint in the bucket
// and the job ends with the reference's bytes.
TEST_F(SlurmE2eTest, OnS3ANodeThatDiesIsALostLeaseAndTheRetryEndsWithTheSameBytes) {
  const std::string ref = Reference(kFaultSteps);
  ASSERT_EQ(ref.size(), 64u) << ref;
  const std::string prefix = "e2e-" + std::to_string(::getpid()) + "-node";
  ServeProcess s("burst-e2e-slurm-s3", S3Flags(prefix));
  ASSERT_TRUE(s.error().empty()) << s.error();
  const std::string id = SubmitSupportJob(s, kFaultSteps);
  ASSERT_FALSE(id.empty());
  // After the first checkpoint is committed, so there is one to resume.
  Json w;
  ASSERT_TRUE(WaitUntil(
      [&] {
        w = WorkerOf(s, id);
        return w.is_object() && !s.Send("GET", "/v1/fine_tuning/jobs/" + id + "/checkpoints")
                                     .body.value("data", Json::array())
                                     .empty();
      },
      120, 50))
      << s.Send("GET", "/v1/fine_tuning/jobs/" + id).raw;
  ASSERT_LT(s.Send("GET", "/v1/fine_tuning/jobs/" + id).body.value("step", 0), kFaultSteps - 6) << "too late";
  const std::string slurmd = slurm_->slurmd_pid();
  ASSERT_FALSE(slurmd.empty());
  auto stepd = RunCommand({"pgrep", "-f", "^slurmstepd"}, 10'000);
  ASSERT_TRUE(stepd.ok()) << stepd.status().ToString();
  std::vector<pid_t> dead = {static_cast<pid_t>(std::stoi(slurmd)),
                             static_cast<pid_t>(w["pid"].get<int64_t>())};
  for (const std::string& line : Lines(stepd.value().out))
    dead.push_back(static_cast<pid_t>(std::stoi(line)));
  for (pid_t pid : dead) EXPECT_EQ(::kill(pid, SIGKILL), 0) << pid;
  // The lease (5 s) lapses with the node still down.
  EXPECT_TRUE(WaitUntil(
      [&] {
        Json job = s.Send("GET", "/v1/fine_tuning/jobs/" + id).body;
        const Json attempts = job.value("attempts", Json::array());
        return !attempts.empty() && attempts[0]["outcome"] == "lost";
      },
      30, 100))
      << s.Send("GET", "/v1/fine_tuning/jobs/" + id).raw;
  auto back =
      RunCommand({"slurmd", "-f", (slurm_->conf_dir() / "slurm.conf").string(), "-N", "localhost"}, 30'000);
  ASSERT_TRUE(back.ok() && back.value().exit_code == 0)
      << (back.ok() ? back.value().err : back.status().ToString());
  const Json job = WaitEnded(s, id);
  ASSERT_EQ(job.value("status", ""), "succeeded") << job.dump() << s.Output();
  const std::vector<std::string> outcomes = Outcomes(job);
  EXPECT_EQ(outcomes, (std::vector<std::string>{"lost", "completed"})) << job.dump();
  EXPECT_GE(job["attempts"][1].value("resumed_from_step", int64_t{0}), 3) << job.dump();
  EXPECT_EQ(S3AdapterSha(prefix, job), ref);
  EXPECT_TRUE(WaitUntil([&] { return LiveSlurmJobs().empty(); }, 90)) << LiveSlurmJobs();
}

}  // namespace
}  // namespace burst::e2e
