// End-to-end fault tests of fine-tuning jobs: SIGTERM (preemption) and
// SIGKILL of a busy worker, kill -9 and restart of the control plane, a
// job over its time limit and a full disk. Each ends with the fault-free
// run's exact weights, or fails saying why. The fixture is in
// jobs_fixture.h.
#include <sys/mount.h>
#include <sys/statvfs.h>

#include <cerrno>
#include <cstring>

#include "jobs_fixture.h"

namespace burst::e2e::jobs {
namespace {

// 4. SIGTERM to a busy worker is a preemption: a state checkpoint, a new
// attempt that resumes from it, and the same final weights as a clean run.
TEST_F(JobsTest, SigtermPreemptsAndTheJobResumesBitIdentically) {
  Server& s = Shared();
  const Reference& ref = Clean();
  const std::string id = s.Submit(FaultSpec(TrainFile()));
  ASSERT_TRUE(WaitRunningAtStep(s, id, 3)) << "the job ended before step 3 could be seen" << s.Diagnose(id);
  Json w = s.WorkerOf(id);
  ASSERT_TRUE(w.is_object()) << s.Diagnose(id);
  const int64_t pid = w["pid"];
  ASSERT_TRUE(ProcessHas(pid, "BURST_WORKER_ID=" + w["id"].get<std::string>())) << w.dump();
  ASSERT_LT(s.Job(id).value("step", int64_t{0}), kFaultSteps) << "too late to preempt";
  ::kill(static_cast<pid_t>(pid), SIGTERM);

  Json job = s.WaitJob(id);
  ASSERT_EQ(job["status"], "succeeded") << s.Diagnose(id);
  job = s.WaitAttemptsSettled(id);
  ASSERT_EQ(Outcomes(job), (std::vector<std::string>{"preempted", "completed"})) << s.Diagnose(id);
  const Json& a1 = job["attempts"][0];
  const Json& a2 = job["attempts"][1];
  EXPECT_EQ(a1["worker"], w["id"]);
  EXPECT_NE(a2["worker"], w["id"]) << "the preempted worker left; another must run the rest";
  EXPECT_GT(a2["resumed_from_step"].get<int64_t>(), 0) << s.Diagnose(id);
  EXPECT_EQ(job["fine_tuned_model"], id + ":step-" + std::to_string(kFaultSteps));
  EXPECT_FALSE(ProcessHas(pid, "BURST_WORKER_ID=" + w["id"].get<std::string>()))
      << "the preempted worker is still alive";
  ExpectSameWeights(FinalWeights(s, job, kFaultSteps), ref, "after SIGTERM");
  ExpectSameLosses(s.Events(id), ref, "after SIGTERM");
}

// 5. kill -9 of a busy worker: the attempt is lost, the job is retried from
// its newest committed checkpoint and ends with the clean run's weights.
TEST_F(JobsTest, SigkillLosesTheAttemptAndTheRetryResumesBitIdentically) {
  Server& s = Shared();
  const Reference& ref = Clean();
  const std::string id = s.Submit(FaultSpec(TrainFile()));
  // Kill after the first checkpoint is committed, so the retry resumes.
  bool ready = false;
  WaitUntil(
      [&] {
        Json j = s.Job(id);
        if (Terminal(j.value("status", ""))) return true;
        ready = j["status"] == "running" &&
                !s.GetOk("/v1/fine_tuning/jobs/" + id + "/checkpoints")["data"].empty();
        return ready;
      },
      120, 25);
  ASSERT_TRUE(ready) << "no checkpoint seen while the job ran" << s.Diagnose(id);
  Json w = s.WorkerOf(id);
  ASSERT_TRUE(w.is_object()) << s.Diagnose(id);
  const int64_t pid = w["pid"];
  ASSERT_TRUE(ProcessHas(pid, "BURST_WORKER_ID=" + w["id"].get<std::string>())) << w.dump();
  ::kill(static_cast<pid_t>(pid), SIGKILL);

  Json job = s.WaitJob(id);
  ASSERT_EQ(job["status"], "succeeded") << s.Diagnose(id);
  job = s.WaitAttemptsSettled(id);
  ASSERT_EQ(Outcomes(job), (std::vector<std::string>{"lost", "completed"})) << s.Diagnose(id);
  EXPECT_EQ(job["attempts"][0]["worker"], w["id"]);
  EXPECT_TRUE(job["attempts"][0]["error"].is_object()) << job.dump();
  EXPECT_GE(job["attempts"][1]["resumed_from_step"].get<int64_t>(), 5) << s.Diagnose(id);
  EXPECT_EQ(job["fine_tuned_model"], id + ":step-" + std::to_string(kFaultSteps));
  ExpectSameWeights(FinalWeights(s, job, kFaultSteps), ref, "after SIGKILL");
  ExpectSameLosses(s.Events(id), ref, "after SIGKILL");
}

// 6. kill -9 of `burst serve` while a job runs, and a restart on the same
// data folder and port: the job completes, and nothing durable is lost.
TEST_F(JobsTest, ControlPlaneKillAndRestartLosesNothing) {
  const Reference& ref = Clean();
  const int port = FreeTcpPort();
  ASSERT_GT(port, 0);
  Server s(kFastFlags, port);
  s.Start();
  const std::string file = s.Upload("support-train.jsonl", Slurp(SupportTrain()));
  const std::string id = s.Submit(FaultSpec(file));
  ASSERT_TRUE(WaitRunningAtStep(s, id, 3)) << s.Diagnose(id);
  Json w = s.WorkerOf(id);
  ASSERT_TRUE(w.is_object()) << s.Diagnose(id);
  const std::string wid = w["id"];
  const int64_t pid = w["pid"];
  const Json files_before = s.GetOk("/v1/files")["data"];
  const Json events_before = s.Events(id);
  const double usage_before = s.GetOk("/v1/usage")["total_seconds"].get<double>();

  ProcResult killed = s.Signal(SIGKILL, 30);
  ASSERT_EQ(killed.term_signal, SIGKILL) << killed.Describe();
  EXPECT_TRUE(ProcessHas(pid, "BURST_WORKER_ID=" + wid)) << "the worker did not survive its control plane";
  s.Start();  // same --data, same port
  ASSERT_EQ(s.port(), port);

  Json job = s.WaitJob(id);
  ASSERT_EQ(job["status"], "succeeded") << s.Diagnose(id);
  job = s.WaitAttemptsSettled(id);
  ASSERT_FALSE(job["attempts"].empty());
  EXPECT_EQ(Outcomes(job).back(), "completed") << s.Diagnose(id);
  for (const std::string& o : Outcomes(job)) EXPECT_TRUE(o == "completed" || o == "lost") << s.Diagnose(id);
  EXPECT_EQ(job["fine_tuned_model"], id + ":step-" + std::to_string(kFaultSteps));
  std::printf("[restart] attempts after the control-plane restart: %s\n", Join(Outcomes(job)).c_str());
  ExpectSameWeights(FinalWeights(s, job, kFaultSteps), ref, "after a control-plane restart");
  ExpectSameLosses(s.Events(id), ref, "after a control-plane restart");

  // Files, the job's earlier events and the ledger survived.
  EXPECT_EQ(s.GetOk("/v1/files")["data"], files_before);
  Json events_after = s.Events(id);
  ASSERT_GE(events_after.size(), events_before.size());
  for (size_t i = 0; i < events_before.size(); ++i) EXPECT_EQ(events_after[i], events_before[i]) << i;
  EXPECT_GE(s.GetOk("/v1/usage")["total_seconds"].get<double>(), usage_before);

  // The adopted worker's exit is still observed: the pool empties, and the
  // ledger adds up (every second billed is a job's or idle).
  EXPECT_TRUE(WaitUntil([&] { return s.PoolEmpty(); }, kScaledownS + 30))
      << s.Workers().dump() << s.Diagnose(id);
  EXPECT_FALSE(ProcessHas(pid, "BURST_WORKER_ID=" + wid));
  Json usage = s.GetOk("/v1/usage");
  double idle = 0;
  for (const Json& l : usage["data"])
    if (l["line"] == "idle") idle += l["seconds"].get<double>();
  const double jobs_s = s.Job(id)["usage"]["seconds"].get<double>();
  EXPECT_NEAR(usage["total_seconds"].get<double>(), jobs_s + idle, 0.01) << usage.dump();
}

// 8. A job that runs longer than timeout_s fails with code "timeout".
TEST_F(JobsTest, TimeoutFailsTheJob) {
  Server& s = Shared();
  Json spec = Spec(TrainFile(), 300, {{"checkpoint_every", 50}});
  spec["timeout_s"] = 2;
  const std::string id = s.Submit(spec);
  Json job = s.WaitJob(id, 120);
  ASSERT_EQ(job["status"], "failed") << s.Diagnose(id);
  ASSERT_TRUE(job["error"].is_object()) << job.dump();
  EXPECT_EQ(job["error"]["code"], "timeout") << job.dump();
  EXPECT_EQ(job["error"]["param"], "timeout_s") << job.dump();
  job = s.WaitAttemptsSettled(id, 30);
  EXPECT_EQ(Outcomes(job), std::vector<std::string>{"timeout"}) << s.Diagnose(id);
  EXPECT_EQ(job["status"], "failed");
  EXPECT_LT(job["step"].get<int64_t>(), 300);
  EXPECT_TRUE(WaitUntil([&] { return s.WorkerOf(id).is_null(); }, 10)) << s.Diagnose(id);
}

// 8b. A full disk: the worker cannot write its checkpoint (ENOSPC) on a data
// folder it shares with the control plane. The attempt ends failed with
// resource_exhausted saying the disk is full and what it was writing, not
// lost, and the job is not retried into the same disk. The data folder (the
// store, the workers' logs and scratch) is a 64 MiB tmpfs filled up while
// the job trains (needs the right to mount); the metadata database is on
// another disk, as a database is in production: a control plane whose own
// database is full cannot record anything and stops (its leader lease
// cannot be renewed, and it exits saying so), which this test does not cover.
TEST_F(JobsTest, AFullDiskFailsTheAttemptSayingSoInsteadOfLosingIt) {
  TempDir db("burst-e2e-jobs-db");
  std::vector<std::string> flags = kFastFlags;
  flags.insert(flags.end(), {"--database", "sqlite://" + (db.path() / "meta.db").string()});
  auto s = std::make_unique<Server>(flags);
  const fs::path data = s->data();
  if (::mount("tmpfs", data.c_str(), "tmpfs", 0, "size=64m") != 0) {
    GTEST_SKIP() << "cannot mount a tmpfs here: " << std::strerror(errno);
  }
  struct Cleanup {  // the server goes first, then its disk
    std::unique_ptr<Server>& server;
    fs::path dir;
    ~Cleanup() {
      server.reset();
      ::umount2(dir.c_str(), MNT_DETACH);
    }
  } cleanup{s, data};
  s->Start();
  const std::string file = s->Upload("support-train.jsonl", Slurp(SupportTrain()));
  const std::string id = s->Submit(Spec(file, 60, {{"checkpoint_every", 30}}));
  ASSERT_TRUE(WaitRunningAtStep(*s, id, 1)) << s->Diagnose(id);
  struct statvfs vfs {};
  ASSERT_EQ(::statvfs(data.c_str(), &vfs), 0);
  const uint64_t avail = static_cast<uint64_t>(vfs.f_bavail) * vfs.f_frsize;
  {
    std::ofstream filler(data / "filler", std::ios::binary);
    const std::string block(1 << 16, '\0');
    for (uint64_t left = avail > (64 << 10) ? avail - (64 << 10) : 0; left > 0 && filler;) {
      const uint64_t n = std::min<uint64_t>(left, block.size());
      filler.write(block.data(), static_cast<std::streamsize>(n));
      left -= n;
    }
  }
  Json job = s->WaitJob(id, 240);
  ASSERT_EQ(job["status"], "failed") << s->Diagnose(id);
  ASSERT_TRUE(job["error"].is_object()) << job.dump();
  EXPECT_EQ(job["error"]["code"], "resource_exhausted") << job.dump();
  const std::string message = job["error"].value("message", "");
  EXPECT_TRUE(Contains(message, "disk full")) << message;
  EXPECT_TRUE(Contains(message, "checkpoints/step-00000030")) << "it says what it was writing: " << message;
  EXPECT_FALSE(Contains(message, data.string()))
      << "the server's own path stays in the worker's log: " << message;
  job = s->WaitAttemptsSettled(id, 30);
  EXPECT_EQ(Outcomes(job), std::vector<std::string>{"failed"}) << s->Diagnose(id);
}

}  // namespace
}  // namespace burst::e2e::jobs
