// Scheduler tests for sweeps (SubmitSweep: the organisation's cap checked
// once for all of a sweep's jobs, replays, concurrent sweeps), for where a
// resumed job goes, and for the usage ledger when the database refuses
// writes.
#include <gtest/gtest.h>

#include <atomic>
#include <latch>
#include <thread>

#include "db/sqlite.h"
#include "runtime/runtime_test_util.h"

namespace burst {
namespace {

struct SweepRequest {
  SweepRecord sweep;
  std::vector<JobRecord> jobs;
};

// What the API hands SubmitSweep: the record with fresh run ids, one job per run.
SweepRequest MakeSweep(const std::string& org, int n, const std::string& key,
                       const std::string& body = "body") {
  SweepRequest r;
  r.sweep.id = NewId("sweep");
  r.sweep.org_id = org;
  r.sweep.idempotency_key = key;
  r.sweep.request_sha256 = body;
  r.sweep.request = {{"n", n}};
  for (int i = 0; i < n; ++i) {
    r.sweep.runs.push_back({{"job_id", NewId("ftjob")}, {"overrides", {{"i", i}}}});
    JobRecord j;
    j.request_sha256 = body + "/" + std::to_string(i);
    j.spec = {{"model", "burst-small"}, {"training_file", "file-x"}};
    j.total_steps = 3;
    r.jobs.push_back(j);
  }
  return r;
}

class SweepsTest : public RuntimeTest {
 protected:
  void SetUp() override {
    RuntimeTest::SetUp();
    opt_.slots = 0;  // nothing starts: every job stays queued and active
    opt_.max_active_jobs_per_org = 3;
    Restart();
  }
  Result<SweepRecord> Sweep(const SweepRequest& r, bool* created) {
    return rt_->SubmitSweep(r.sweep, r.jobs, created);
  }
  size_t Jobs(const std::string& org) { return Must(md_->ListJobs(org, "", 1000)).size(); }
};

TEST_F(SweepsTest, ASweepOverTheCapIsRefusedBeforeAnythingExists) {
  Submit(org_a_);
  bool created = true;
  auto over = Sweep(MakeSweep(org_a_, 3, "k1"), &created);
  ASSERT_FALSE(over.ok());
  EXPECT_EQ(over.status().code(), Code::kResourceExhausted);
  EXPECT_EQ(over.status().reason(), "org_cap");
  EXPECT_EQ(over.status().param(), "max_active_jobs");
  EXPECT_FALSE(created);
  EXPECT_FALSE(Must(md_->FindSweepByKey(org_a_, "k1")).has_value()) << "no sweep record";
  EXPECT_EQ(Jobs(org_a_), 1u) << "no job of it";

  SweepRequest fits = MakeSweep(org_a_, 2, "k2");
  SweepRecord sw = Must(Sweep(fits, &created));
  EXPECT_TRUE(created);
  EXPECT_EQ(Jobs(org_a_), 3u);
  for (size_t i = 0; i < 2; ++i) {
    JobRecord j = Job(fits.sweep.runs[i]["job_id"]);
    EXPECT_EQ(j.spec["sweep_id"], sw.id);
    EXPECT_EQ(j.idempotency_key, sw.id + "/" + std::to_string(i));
    EXPECT_EQ(j.org_id, org_a_);
  }
  EXPECT_TRUE(Sweep(MakeSweep(org_b_, 3, "k1"), &created).ok()) << "another organisation has its own cap";
}

// A paused job does not count to the organisation's cap; resuming it does.
TEST_F(SweepsTest, APausedJobFreesItsPlaceAndResumingTakesOne) {
  const std::string paused = Submit(org_a_);
  Submit(org_a_);
  Submit(org_a_);
  ASSERT_EQ(rt_->Pause(org_a_, paused).value().status, JobStatus::kPaused);
  Submit(org_a_);  // in the place it freed
  auto over = rt_->Resume(org_a_, paused);
  ASSERT_FALSE(over.ok());
  EXPECT_EQ(over.status().reason(), "org_cap");
  EXPECT_EQ(Job(paused).status, JobStatus::kPaused) << "still paused, nothing changed";
  EXPECT_TRUE(rt_->Resume(org_b_, paused).status().code() == Code::kNotFound);
}

TEST_F(SweepsTest, AReplayIsNotNewAndCreatesWhatAnInterruptedRequestDidNot) {
  SweepRequest first = MakeSweep(org_a_, 3, "k");
  bool created = false;
  SweepRecord sw = Must(Sweep(first, &created));
  ASSERT_TRUE(created);
  // The same request again (the API gives it fresh run ids): the same sweep,
  // no new job, although the organisation is at its cap.
  SweepRecord again = Must(Sweep(MakeSweep(org_a_, 3, "k"), &created));
  EXPECT_FALSE(created);
  EXPECT_EQ(again.id, sw.id);
  EXPECT_EQ(Jobs(org_a_), 3u);
  // Another body under the same key is a conflict.
  EXPECT_EQ(Sweep(MakeSweep(org_a_, 1, "k", "other"), &created).status().code(), Code::kAlreadyExists);

  // An interrupted request: the record and its first job exist, the rest do not.
  SweepRequest cut = MakeSweep(org_b_, 3, "cut");
  SweepRecord stored = Must(md_->CreateSweep(cut.sweep, &created));
  JobRecord j0 = cut.jobs[0];
  j0.id = stored.runs[0]["job_id"];
  j0.org_id = org_b_;
  j0.idempotency_key = stored.id + "/0";
  j0.spec["sweep_id"] = stored.id;
  ASSERT_TRUE(rt_->Submit(j0, &created).ok());
  SweepRecord replay = Must(Sweep(MakeSweep(org_b_, 3, "cut"), &created));
  EXPECT_FALSE(created);
  EXPECT_EQ(replay.id, stored.id);
  ASSERT_EQ(Jobs(org_b_), 3u) << "runs 1 and 2 made, run 0 not twice";
  for (int i = 0; i < 3; ++i) EXPECT_EQ(Job(stored.runs[i]["job_id"]).spec["sweep_id"], stored.id);
}

TEST_F(SweepsTest, AReplayThatWouldPassTheCapIsRefusedToo) {
  opt_.max_active_jobs_per_org = 2;
  Restart();
  bool created = false;
  SweepRequest cut = MakeSweep(org_a_, 3, "cut");
  SweepRecord stored = Must(md_->CreateSweep(cut.sweep, &created));
  Submit(org_a_);
  auto r = Sweep(MakeSweep(org_a_, 3, "cut"), &created);
  EXPECT_EQ(r.status().reason(), "org_cap") << "3 missing jobs on top of 1 active pass a cap of 2";
  EXPECT_EQ(Jobs(org_a_), 1u);
  (void)stored;
}

TEST_F(SweepsTest, TwoSweepsAtOnceNeverPassTheCapTogether) {
  for (int round = 0; round < 20; ++round) {
    const std::string org = Must(md_->CreateOrg("race-" + std::to_string(round))).id;
    std::latch go(2);
    Result<SweepRecord> r1 = Status(), r2 = Status();
    bool c1 = false, c2 = false;
    SweepRequest s1 = MakeSweep(org, 2, "a"), s2 = MakeSweep(org, 2, "b");
    std::thread t1([&] {
      go.arrive_and_wait();
      r1 = Sweep(s1, &c1);
    });
    std::thread t2([&] {
      go.arrive_and_wait();
      r2 = Sweep(s2, &c2);
    });
    t1.join();
    t2.join();
    EXPECT_NE(r1.ok(), r2.ok()) << "round " << round << ": exactly one of two 2-job sweeps fits a cap of 3";
    const Status& refused = r1.ok() ? r2.status() : r1.status();
    EXPECT_EQ(refused.reason(), "org_cap");
    EXPECT_EQ(Jobs(org), 2u) << "round " << round;
  }
}

// Submissions arriving together are written in one group commit: every one
// is answered with its own job, the cap (3) counts the jobs being written
// (16 at once create 3), and one request sent by many threads at once makes
// one job, which all of them are answered with.
JobRecord SubmittedJob(const std::string& org, const std::string& key, const std::string& body) {
  JobRecord j;
  j.id = NewId("ftjob");
  j.org_id = org;
  j.idempotency_key = key;
  j.request_sha256 = body;
  j.spec = {{"model", "burst-small"}, {"training_file", "file-x"}};
  j.total_steps = 3;
  return j;
}

TEST_F(SweepsTest, SubmissionsAtOnceAreWrittenTogetherAndNeverPassTheCap) {
  for (int round = 0; round < 10; ++round) {
    const std::string org = Must(md_->CreateOrg("burst-" + std::to_string(round))).id;
    constexpr int kThreads = 16;
    std::latch go(kThreads);
    std::vector<Result<JobRecord>> results(kThreads, Status(Code::kInternal, "not run"));
    std::vector<std::thread> threads;
    for (int i = 0; i < kThreads; ++i) {
      threads.emplace_back([&, i] {
        JobRecord j = SubmittedJob(org, "", "body " + std::to_string(i));
        bool created = false;
        go.arrive_and_wait();
        results[i] = rt_->Submit(j, &created);
        if (results[i].ok() && !created) results[i] = Status(Code::kInternal, "accepted but not created");
      });
    }
    for (auto& t : threads) t.join();
    int accepted = 0;
    for (const auto& r : results) {
      if (r.ok()) {
        ++accepted;
      } else {
        EXPECT_EQ(r.status().reason(), "org_cap") << r.status().ToString();
      }
    }
    EXPECT_EQ(accepted, 3) << "round " << round;
    EXPECT_EQ(Jobs(org), 3u) << "round " << round;
    EXPECT_EQ(rt_->QueuedCount(), static_cast<size_t>(3 * (round + 1))) << "round " << round;
  }
}

TEST_F(SweepsTest, OneRequestSentByManyAtOnceMakesOneJob) {
  opt_.max_active_jobs_per_org = 0;
  Restart();
  const std::string org = Must(md_->CreateOrg("retries")).id;
  constexpr int kThreads = 8;
  std::latch go(kThreads);
  std::vector<Result<JobRecord>> results(kThreads, Status(Code::kInternal, "not run"));
  std::atomic<int> created_count{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < kThreads; ++i) {
    threads.emplace_back([&, i] {
      JobRecord j = SubmittedJob(org, "one-key", "one body");
      bool created = false;
      go.arrive_and_wait();
      results[i] = rt_->Submit(j, &created);
      if (created) ++created_count;
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(created_count.load(), 1);
  for (const auto& r : results) {
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_EQ(r.value().id, results[0].value().id);
  }
  EXPECT_EQ(Jobs(org), 1u);
  EXPECT_EQ(rt_->QueuedCount(), 1u);
}

TEST_F(SweepsTest, ANewSweepWhoseJobCannotBeSubmittedIsCancelledWithItsJobs) {
  opt_.max_active_jobs_per_org = 0;
  Restart();
  const std::string taken = Submit(org_a_);
  SweepRequest r = MakeSweep(org_a_, 3, "k");
  r.sweep.runs[1]["job_id"] = taken;  // its id exists: creating run 1 fails
  bool created = false;
  auto res = Sweep(r, &created);
  ASSERT_FALSE(res.ok());
  EXPECT_EQ(res.status().code(), Code::kAlreadyExists) << res.status().ToString();
  auto sw = Must(md_->FindSweepByKey(org_a_, "k"));
  ASSERT_TRUE(sw.has_value());
  EXPECT_GT(sw->cancelled_at, 0) << "the sweep is cancelled";
  EXPECT_EQ(Job(r.sweep.runs[0]["job_id"]).status, JobStatus::kCancelled) << "with the job it had made";
  EXPECT_EQ(Job(taken).status, JobStatus::kQueued) << "someone else's job is untouched";
  EXPECT_EQ(rt_->QueuedCount(), 1u);
}

// ---------------------------------------------------------------------------
// where a resumed job goes

// A state checkpoint resumes exactly only on the BLAS it was written with
// (the trainer refuses another by name): the job's next attempt goes to an
// idle worker that computes with it before one warm with its base model.
TEST_F(RuntimeTest, AResumedJobGoesToAWorkerWithItsCheckpointsBlas) {
  opt_.slots = 2;
  Restart();
  const BlasFacts haswell{"OpenBLAS 0.3.21 DYNAMIC_ARCH MAX_THREADS=64", "Haswell"};
  const BlasFacts skylake{"OpenBLAS 0.3.21 DYNAMIC_ARCH MAX_THREADS=64", "SkylakeX"};
  const std::string resumed = Submit(org_a_), other = Submit(org_a_);
  ASSERT_EQ(exec_.started.size(), 2u);
  const std::string w1 = exec_.started[0].worker_id, w2 = exec_.started[1].worker_id;
  ASSERT_TRUE(rt_->Register(w1, 0, 0, haswell).ok());
  ASSERT_TRUE(rt_->Register(w2, 0, 0, skylake).ok());
  ASSERT_EQ(Lease(w1)["job"], resumed);
  ASSERT_EQ(Lease(w2, "burst-small")["job"], other) << "w2 has the base model loaded, w1 none";
  Json pool = rt_->WorkersJson(org_a_)["data"];
  ASSERT_EQ(pool.size(), 2u);
  for (const Json& w : pool) {
    EXPECT_EQ(w["blas"],
              (Json{{"library", haswell.library}, {"kernels", w["id"] == w1 ? "Haswell" : "SkylakeX"}}))
        << "what each computes with, as it registered";
  }
  ASSERT_TRUE(rt_->Checkpoint(w1, resumed, 1, 3, Json::object(), haswell).ok());
  const Json transient = {{"code", "unavailable"}, {"message", "the store did not answer"}};
  ASSERT_TRUE(rt_->Finish(w1, resumed, 1, "failed", transient, true, 3, 0).ok());
  ASSERT_TRUE(rt_->Finish(w2, other, 1, "completed", Json(), false, 7, 1).ok());
  clock_.Advance(1000);  // the retry's backoff
  rt_->Tick();
  EXPECT_FALSE(Lease(w2, "burst-small").is_object()) << "warm, but its kernels would refuse the resume";
  Json task = Lease(w1);
  EXPECT_EQ(task["job"], resumed);
  EXPECT_EQ(task["attempt"], 2);
  EXPECT_EQ(task["resume_step"], 3);
}

// ---------------------------------------------------------------------------
// the usage ledger when the database refuses writes

TEST_F(RuntimeTest, ClosedSegmentsOutliveAFailingLedgerWriteAndAreWrittenLater) {
  const std::string path = UseFileDb();
  std::string job = Submit(org_a_);
  clock_.Advance(1000);
  std::string w = Register();
  Lease(w);
  WorkerWritesRefused refused(path);
  testing::internal::CaptureStderr();
  clock_.Advance(4000);
  ASSERT_TRUE(rt_->Finish(w, job, 1, "completed", Json(), false, 3, 100).ok()) << "the job's own writes work";
  clock_.Advance(2000);
  exec_.Exit(w);
  rt_->Tick();  // the exit: its record cannot be written either
  rt_->Tick();
  const std::string err = testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find("burst serve: cannot write worker " + w), std::string::npos) << err;
  EXPECT_NE(err.find("disk full"), std::string::npos) << err;
  EXPECT_EQ(Must(md_->WorkerUsage(w)).size(), 1u) << "only the startup segment, written before";
  EXPECT_EQ(rt_->LiveWorkerCount(), 0u);

  refused.Lift();
  rt_->Tick();
  auto segs = Must(md_->WorkerUsage(w));
  ASSERT_EQ(segs.size(), 3u) << "startup, training, idle";
  EXPECT_EQ(segs[1].line, UsageLine::kTraining);
  EXPECT_EQ(segs[2].line, UsageLine::kIdle);
  int64_t total = 0;
  for (const UsageRecord& u : segs) total += u.end_ms - u.start_ms;
  EXPECT_EQ(total, 1000 + 4000 + 2000) << "nothing lost, nothing twice";
  bool exited = false;
  for (const WorkerRecord& r : Must(md_->ListWorkers(false)))
    exited |= r.id == w && r.state == WorkerState::kExited;
  EXPECT_TRUE(exited);
}

// Whoever reads a job as ended reads its cost too: the database refuses a
// job's end while it has no usage line, and the runtime's end still goes
// through (its usage lines are written first), for both outcomes that end it.
TEST_F(RuntimeTest, AJobReadsAsEndedOnlyWithItsUsageWritten) {
  const std::string path = UseFileDb();
  auto raw = Db::Open(path);
  ASSERT_TRUE(raw.ok());
  ASSERT_TRUE(raw.value()
                  ->Exec("CREATE TRIGGER ended_with_usage BEFORE UPDATE OF status ON jobs "
                         "WHEN NEW.status IN ('succeeded', 'failed') AND NOT EXISTS "
                         "(SELECT 1 FROM usage WHERE job_id = NEW.id) "
                         "BEGIN SELECT RAISE(ABORT, 'ended without its usage'); END;")
                  .ok());
  const std::string done = Submit(org_a_);
  const std::string w = Register();
  Lease(w);
  clock_.Advance(3000);
  Status s = rt_->Finish(w, done, 1, "completed", Json(), false, 3, 100);
  ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_EQ(Job(done).status, JobStatus::kSucceeded);
  const std::string failed = Submit(org_a_);
  Lease(w);
  clock_.Advance(2000);
  s = rt_->Finish(w, failed, 1, "failed", Json{{"code", "bad_data"}, {"message", "x"}}, false, 0, 0);
  ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_EQ(Job(failed).status, JobStatus::kFailed);
}

// Scopes and outcomes cross into the runtime as names: one it does not know
// is refused before anything is written, and stops a recovery rather than
// being billed as a guess.
TEST_F(RuntimeTest, UnknownScopesAndOutcomesAreRefusedNotGuessed) {
  const std::string path = UseFileDb();
  JobRecord j;
  j.id = NewId("ftjob");
  j.org_id = org_a_;
  j.request_sha256 = j.id;
  j.spec = {{"model", "burst-small"}, {"training_file", "file-x"}, {"scope", "shared"}};
  bool created = false;
  auto refused = rt_->Submit(j, &created);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), Code::kDataLoss);
  EXPECT_NE(refused.status().message().find("unknown billing scope \"shared\""), std::string::npos)
      << refused.status().message();
  EXPECT_FALSE(created);
  EXPECT_EQ(md_->GetJobById(j.id).status().code(), Code::kNotFound) << "nothing was written";

  // A worker reports only completed, preempted, cancelled or failed.
  const std::string job = Submit(org_a_);
  const std::string w = Register();
  Lease(w);
  for (const char* outcome : {"lost", "timeout", "done", ""}) {
    Status s = rt_->Finish(w, job, 1, outcome, Json(), false, 1, 10);
    EXPECT_EQ(s.code(), Code::kInvalidArgument) << outcome;
    EXPECT_EQ(s.param(), "outcome");
  }
  EXPECT_EQ(Job(job).status, JobStatus::kRunning) << "none of them ended the attempt";

  // A spec edited behind the control plane's back stops its recovery with
  // the job named.
  auto raw = Db::Open(path);
  ASSERT_TRUE(raw.ok());
  ASSERT_TRUE(raw.value()->Exec("UPDATE jobs SET spec = json_set(spec, '$.scope', 'shared')").ok());
  Restart();
  Status s = rt_->Recover();
  EXPECT_EQ(s.code(), Code::kDataLoss);
  EXPECT_NE(s.message().find("job " + job), std::string::npos) << s.message();
}

}  // namespace
}  // namespace burst
