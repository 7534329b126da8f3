// Scheduler tests: a fake executor and an injected clock, no sleeps, no
// processes (the fixture is in runtime_test_util.h). The real local executor
// and `burst worker` are covered by the e2e tests in tests/e2e/.
#include <gtest/gtest.h>

#include <thread>

#include "core/ids.h"
#include "runtime/runtime_test_util.h"

namespace burst {
namespace {

TEST_F(RuntimeTest, ScalesFromZeroRunsAJobAndBillsTheWholeLifetime) {
  EXPECT_EQ(rt_->LiveWorkerCount(), 0u);
  std::string job = Submit(org_a_);
  ASSERT_EQ(exec_.started.size(), 1u) << "a waiting task starts a worker";
  EXPECT_EQ(Job(job).status, JobStatus::kQueued);
  clock_.Advance(1500);  // cold start
  std::string w = Register();
  Json task = Lease(w);
  ASSERT_TRUE(task.is_object());
  EXPECT_EQ(task["job"], job);
  EXPECT_EQ(task["attempt"], 1);
  EXPECT_EQ(task["total_steps"], 7);
  EXPECT_EQ(Job(job).status, JobStatus::kRunning);
  clock_.Advance(4000);
  ASSERT_EQ(rt_->Heartbeat(w, job, 1, 3).value(), "continue");
  clock_.Advance(4000);
  ASSERT_TRUE(rt_->Finish(w, job, 1, "completed", Json(), false, 5, 1234).ok());
  JobRecord j = Job(job);
  EXPECT_EQ(j.status, JobStatus::kSucceeded);
  EXPECT_EQ(j.fine_tuned_model, job + ":step-5");
  EXPECT_EQ(j.trained_tokens, 1234);
  // Idle, then the worker leaves after its window.
  clock_.Advance(60'000);
  ASSERT_TRUE(rt_->WorkerExiting(w, "scaledown window passed").ok());
  clock_.Advance(300);
  exec_.Exit(w);
  rt_->Tick();
  EXPECT_EQ(rt_->LiveWorkerCount(), 0u);
  auto segs = Must(md_->WorkerUsage(w));
  ASSERT_EQ(segs.size(), 3u);
  EXPECT_EQ(segs[0].line, UsageLine::kStartup);
  EXPECT_EQ(segs[0].job_id, job);
  EXPECT_EQ(segs[1].line, UsageLine::kTraining);
  EXPECT_EQ(segs[2].line, UsageLine::kIdle);
  EXPECT_EQ(segs[2].org_id, org_a_);
  int64_t total = 0;
  for (auto& s : segs) total += s.end_ms - s.start_ms;
  EXPECT_EQ(total, 1500 + 8000 + 60'300) << "segments add up to the observed lifetime";
  UsageSum ju = Must(md_->JobUsage(job));
  EXPECT_DOUBLE_EQ(ju.seconds, 9.5);
  EXPECT_DOUBLE_EQ(ju.cost, 9.5 * 0.5);
}

// A worker's token names it from its start to its exit, and nothing else
// does; authenticating takes the tokens' own lock, not the scheduler's.
TEST_F(RuntimeTest, AWorkersTokenAuthenticatesItUntilItExits) {
  Submit(org_a_);
  ASSERT_EQ(exec_.started.size(), 1u);
  const WorkerLaunch launch = exec_.started.back();
  EXPECT_EQ(rt_->AuthenticateWorker(launch.token).value(), launch.worker_id) << "before it registers";
  EXPECT_EQ(rt_->AuthenticateWorker(launch.token + "x").status().code(), Code::kNotFound);
  EXPECT_EQ(rt_->AuthenticateWorker("").status().code(), Code::kNotFound);
  const std::string w = Register();
  EXPECT_EQ(rt_->AuthenticateWorker(launch.token).value(), w);
  ASSERT_TRUE(rt_->WorkerExiting(w, "test").ok());
  exec_.Exit(w);
  rt_->Tick();
  EXPECT_EQ(rt_->AuthenticateWorker(launch.token).status().code(), Code::kNotFound) << "gone with its worker";
}

// A worker that waits in the cluster's queue (a Slurm job pending): the
// wait is the attempt's queued_ms and the worker's, kept with its record,
// and is not billed; start-up is billed from when the process began.
TEST_F(RuntimeTest, QueueTimeIsRecordedAndNotBilled) {
  std::string job = Submit(org_a_);
  ASSERT_EQ(exec_.started.size(), 1u);
  const std::string w = exec_.started.back().worker_id;
  const int64_t requested = clock_.NowMs();
  clock_.Advance(2000);  // pending in the cluster's queue
  const int64_t began = clock_.NowMs();
  clock_.Advance(500);  // the process starts up
  ASSERT_TRUE(rt_->Register(w, 42, began).ok());
  ASSERT_TRUE(Lease(w).is_object());
  clock_.Advance(3000);
  ASSERT_TRUE(rt_->Finish(w, job, 1, "completed", Json(), false, 5, 10).ok());
  auto attempts = Must(md_->ListAttempts(job));
  ASSERT_EQ(attempts.size(), 1u);
  EXPECT_EQ(attempts[0].queued_ms, 2000);
  EXPECT_EQ(attempts[0].startup_ms, 500);
  ASSERT_TRUE(rt_->WorkerExiting(w, "scaledown window passed").ok());
  exec_.Exit(w);
  rt_->Tick();
  WorkerRecord rec;
  for (const WorkerRecord& r : Must(md_->ListWorkers(false)))
    if (r.id == w) rec = r;
  ASSERT_EQ(rec.id, w);
  EXPECT_EQ(rec.queued_ms, 2000) << "the queue time is kept with the worker's record";
  int64_t billed = 0;
  for (const UsageRecord& u : Must(md_->WorkerUsage(w))) billed += u.end_ms - u.start_ms;
  EXPECT_EQ(billed, rec.exited_ms - requested - 2000) << "everything but the queue time is billed";
  EXPECT_DOUBLE_EQ(Must(md_->JobUsage(job)).seconds, 3.5) << "start-up and training, not the queue";
}

TEST_F(RuntimeTest, WarmWorkerTakesTheNextTaskForItsModel) {
  std::string j1 = Submit(org_a_);
  std::string w = Register();
  Lease(w);
  ASSERT_TRUE(rt_->Finish(w, j1, 1, "completed", Json(), false, 1, 1).ok());
  std::string j2 = Submit(org_a_);
  EXPECT_EQ(exec_.started.size(), 1u) << "no new worker while a warm one is idle";
  Json task = Lease(w, "burst-small");
  EXPECT_EQ(task["job"], j2);
}

TEST_F(RuntimeTest, MoreJobsThanSlotsQueueAndDispatchIsFairBetweenOrganisations) {
  std::vector<std::string> a;
  for (int i = 0; i < 5; ++i) a.push_back(Submit(org_a_));
  std::string b = Submit(org_b_);
  ASSERT_EQ(exec_.started.size(), 1u) << "one slot: one worker";
  std::string w = Register();
  EXPECT_EQ(Lease(w)["job"], a[0]);
  EXPECT_EQ(rt_->QueuedCount(), 5u);
  for (const auto& id : a) EXPECT_NE(Job(id).status, JobStatus::kFailed);
  ASSERT_TRUE(rt_->Finish(w, a[0], 1, "completed", Json(), false, 1, 1).ok());
  EXPECT_EQ(Lease(w)["job"], b) << "the organisation with nothing running goes first";
  ASSERT_TRUE(rt_->Finish(w, b, 1, "completed", Json(), false, 1, 1).ok());
  EXPECT_EQ(Lease(w)["job"], a[1]);
}

TEST_F(RuntimeTest, TwoSlotsStartTwoWorkersForTwoTasks) {
  opt_.slots = 2;
  Restart();
  Submit(org_a_);
  Submit(org_b_);
  Submit(org_b_);
  EXPECT_EQ(exec_.started.size(), 2u);
  EXPECT_NE(exec_.started[0].slot, exec_.started[1].slot);
}

TEST_F(RuntimeTest, ALapsedLeaseRequeuesWithBackoffAndResumesFromTheCheckpoint) {
  std::string job = Submit(org_a_);
  std::string w = Register();
  Lease(w);
  ASSERT_TRUE(rt_->Checkpoint(w, job, 1, 4, {{"train_loss", 1.5}}).ok());
  clock_.Advance(10'001);  // no heartbeat
  rt_->Tick();
  JobRecord j = Job(job);
  EXPECT_EQ(j.status, JobStatus::kQueued);
  EXPECT_EQ(j.retries, 1);
  EXPECT_EQ(j.resume_step, 4);
  auto attempts = Must(md_->ListAttempts(job));
  ASSERT_EQ(attempts.size(), 1u);
  EXPECT_EQ(attempts[0].outcome, AttemptOutcome::kLost);
  EXPECT_EQ(exec_.stopped.back(), w) << "the cut-off worker is stopped";
  exec_.Exit(w, "signal 15");
  rt_->Tick();
  EXPECT_EQ(exec_.started.size(), 1u) << "backoff: not yet";
  clock_.Advance(1000);
  rt_->Tick();
  ASSERT_EQ(exec_.started.size(), 2u);
  std::string w2 = Register();
  Json task = Lease(w2);
  EXPECT_EQ(task["attempt"], 2);
  EXPECT_EQ(task["resume_step"], 4);
  // The old worker's reports are refused.
  Status lost = rt_->Heartbeat(w, job, 1, 5).status();
  EXPECT_EQ(lost.code(), Code::kFailedPrecondition);
  EXPECT_EQ(lost.reason(), "lease_lost");
  EXPECT_EQ(lost.param(), "attempt");
}

TEST_F(RuntimeTest, RetriesStopAtMaxRetries) {
  std::string job = Submit(org_a_);  // max_retries 2
  for (int i = 0; i < 3; ++i) {
    clock_.Advance(60'000);
    rt_->Tick();
    std::string w = Register();
    ASSERT_EQ(Lease(w)["attempt"], i + 1);
    exec_.Exit(w, "signal 9");
    rt_->Tick();
  }
  JobRecord j = Job(job);
  EXPECT_EQ(j.status, JobStatus::kFailed);
  EXPECT_EQ(j.error["code"], "retries_exhausted");
  EXPECT_EQ(Must(md_->ListAttempts(job)).size(), 3u);
}

TEST_F(RuntimeTest, PreemptionRequeuesAtOnceWithoutSpendingARetry) {
  std::string job = Submit(org_a_);
  std::string w = Register();
  Lease(w);
  ASSERT_TRUE(rt_->Checkpoint(w, job, 1, 2, Json::object()).ok());
  ASSERT_TRUE(rt_->Finish(w, job, 1, "preempted", Json(), false, 2, 10).ok());
  JobRecord j = Job(job);
  EXPECT_EQ(j.retries, 0);
  EXPECT_EQ(j.status, JobStatus::kQueued) << "requeued at once, with no backoff";
  EXPECT_EQ(Lease(w)["action"], "exit") << "the preempted worker takes no more tasks";
  EXPECT_EQ(Must(md_->ListAttempts(job))[0].outcome, AttemptOutcome::kPreempted);
  exec_.Exit(w);
  rt_->Tick();
  ASSERT_EQ(exec_.started.size(), 2u);
  EXPECT_EQ(Lease(Register())["attempt"], 2);
}

TEST_F(RuntimeTest, DeterministicFailureFailsOnce) {
  std::string job = Submit(org_a_);
  std::string w = Register();
  Lease(w);
  Json err = {{"code", "invalid_argument"}, {"message", "train.jsonl:3: bad"}, {"param", "train.jsonl:3"}};
  ASSERT_TRUE(rt_->Finish(w, job, 1, "failed", err, false, 0, 0).ok());
  JobRecord j = Job(job);
  EXPECT_EQ(j.status, JobStatus::kFailed);
  EXPECT_EQ(j.error, err);
  EXPECT_EQ(j.attempts, 1);
}

TEST_F(RuntimeTest, CancelQueuedAndRunning) {
  std::string running = Submit(org_a_);
  std::string queued = Submit(org_a_);
  std::string w = Register();
  Lease(w);
  ASSERT_EQ(rt_->Cancel(org_a_, queued).value().status, JobStatus::kCancelled);
  EXPECT_EQ(rt_->QueuedCount(), 0u);
  EXPECT_EQ(rt_->Cancel(org_b_, running).status().code(), Code::kNotFound)
      << "other organisations see nothing";
  ASSERT_EQ(rt_->Cancel(org_a_, running).value().status, JobStatus::kCancelled);
  EXPECT_EQ(rt_->Heartbeat(w, running, 1, 1).value(), "cancel");
  ASSERT_TRUE(rt_->Finish(w, running, 1, "cancelled", Json(), false, 1, 0).ok());
  EXPECT_EQ(Must(md_->ListAttempts(running))[0].outcome, AttemptOutcome::kCancelled);
  EXPECT_EQ(Job(running).status, JobStatus::kCancelled);
  EXPECT_EQ(rt_->Cancel(org_a_, running).status().code(), Code::kFailedPrecondition);
}

// Pause: a queued job leaves the queue; a running one is told to stop (its
// worker checkpoints on the way out), its attempt ends preempted, and
// nothing requeues it until Resume, which goes on from the checkpoint.
TEST_F(RuntimeTest, PauseStopsAfterACheckpointAndResumeGoesOnFromIt) {
  std::string running = Submit(org_a_);
  std::string queued = Submit(org_a_);
  std::string w = Register();
  Lease(w);
  ASSERT_EQ(rt_->Pause(org_a_, queued).value().status, JobStatus::kPaused);
  EXPECT_EQ(rt_->QueuedCount(), 0u);
  EXPECT_EQ(rt_->Pause(org_a_, queued).status().code(), Code::kFailedPrecondition) << "already paused";
  EXPECT_EQ(rt_->Pause(org_b_, running).status().code(), Code::kNotFound);
  ASSERT_EQ(rt_->Pause(org_a_, running).value().status, JobStatus::kPaused);
  EXPECT_EQ(rt_->Heartbeat(w, running, 1, 3).value(), "cancel") << "the worker is told to stop";
  EXPECT_EQ(rt_->Resume(org_a_, running).status().code(), Code::kFailedPrecondition) << "still stopping";
  ASSERT_TRUE(rt_->Checkpoint(w, running, 1, 3, Json::object()).ok());
  ASSERT_TRUE(rt_->Finish(w, running, 1, "cancelled", Json(), false, 3, 30).ok());
  EXPECT_EQ(Must(md_->ListAttempts(running))[0].outcome, AttemptOutcome::kPreempted);
  JobRecord j = Job(running);
  EXPECT_EQ(j.status, JobStatus::kPaused);
  EXPECT_EQ(j.resume_step, 3);
  EXPECT_EQ(j.retries, 0) << "a pause spends no retry";
  clock_.Advance(60'000);
  rt_->Tick();
  EXPECT_EQ(rt_->QueuedCount(), 0u) << "nothing requeues a paused job";

  ASSERT_EQ(rt_->Resume(org_a_, running).value().status, JobStatus::kQueued);
  EXPECT_EQ(rt_->Resume(org_a_, running).status().code(), Code::kFailedPrecondition) << "not paused any more";
  Json task = Lease(w);
  EXPECT_EQ(task["attempt"], 2);
  EXPECT_EQ(task["resume_step"], 3) << "it goes on from its checkpoint";
  ASSERT_TRUE(rt_->Finish(w, running, 2, "completed", Json(), false, 4, 40).ok());
  EXPECT_EQ(Job(running).status, JobStatus::kSucceeded);
  EXPECT_EQ(rt_->Pause(org_a_, running).status().code(), Code::kFailedPrecondition) << "over";
  ASSERT_EQ(rt_->Resume(org_a_, queued).value().status, JobStatus::kQueued);
  EXPECT_EQ(Lease(w)["attempt"], 1) << "the paused queued job runs its first attempt";
}

TEST_F(RuntimeTest, TimeoutFailsTheJobAndStopsTheTask) {
  std::string job = Submit(org_a_, "burst-small", {{"timeout_s", 5.0}});
  std::string w = Register();
  Lease(w);
  clock_.Advance(3000);
  ASSERT_EQ(rt_->Heartbeat(w, job, 1, 1).value(), "continue");
  clock_.Advance(2500);
  rt_->Tick();
  EXPECT_EQ(Job(job).status, JobStatus::kFailed);
  EXPECT_EQ(Job(job).error["code"], "timeout");
  ASSERT_EQ(rt_->Heartbeat(w, job, 1, 2).value(), "cancel");
  ASSERT_TRUE(rt_->Finish(w, job, 1, "cancelled", Json(), false, 2, 0).ok());
  EXPECT_EQ(Must(md_->ListAttempts(job))[0].outcome, AttemptOutcome::kTimeout);
}

// Serverless scope: the worker's time at cost 0, the run's trained tokens
// charged once when it completes; a timed-out job's tokens are not charged.
TEST_F(RuntimeTest, ServerlessJobsAreBilledByTokensOnceAndNotWhenTheyTimeOut) {
  opt_.price_train_per_mtok = 2.0;
  Restart();
  std::string done = Submit(org_a_, "burst-small", {{"scope", "serverless"}});
  std::string w = Register();
  Lease(w);
  clock_.Advance(4000);
  ASSERT_TRUE(rt_->Finish(w, done, 1, "completed", Json(), false, 7, 500'000).ok());
  std::string late = Submit(org_a_, "burst-small", {{"scope", "serverless"}, {"timeout_s", 1.0}});
  Lease(w);
  clock_.Advance(1500);
  rt_->Tick();
  ASSERT_EQ(Job(late).status, JobStatus::kFailed);
  ASSERT_TRUE(rt_->Finish(w, late, 1, "cancelled", Json(), false, 3, 200'000).ok());
  double charged = 0, segment_cost = 0;
  int64_t tokens = 0;
  for (const UsageRecord& u : Must(md_->WorkerUsage(w))) segment_cost += u.cost;
  for (const UsageSum& l : Must(md_->SumUsage(org_a_, 0, 0))) {
    if (l.scope == BillingScope::kServerless && l.tokens > 0) {
      charged += l.cost;
      tokens += l.tokens;
    }
  }
  EXPECT_EQ(segment_cost, 0.0) << "serverless worker time is recorded at cost 0";
  EXPECT_EQ(tokens, 500'000) << "the completed run's tokens only";
  EXPECT_DOUBLE_EQ(charged, 1.0);
  EXPECT_EQ(Must(md_->JobUsage(late)).tokens, 0);
}

TEST_F(RuntimeTest, AWorkerThatIgnoresACancelIsStopped) {
  std::string job = Submit(org_a_);
  std::string w = Register();
  Lease(w);
  ASSERT_TRUE(rt_->Cancel(org_a_, job).ok());
  clock_.Advance(9000);
  ASSERT_EQ(rt_->Heartbeat(w, job, 1, 1).value(), "cancel");
  clock_.Advance(9000);
  ASSERT_EQ(rt_->Heartbeat(w, job, 1, 1).value(), "cancel");
  clock_.Advance(3000);
  rt_->Tick();
  ASSERT_FALSE(exec_.stopped.empty());
  EXPECT_EQ(exec_.stopped.back(), w);
  exec_.Exit(w, "signal 15");
  rt_->Tick();
  EXPECT_EQ(Must(md_->ListAttempts(job))[0].outcome, AttemptOutcome::kCancelled);
  EXPECT_EQ(Job(job).status, JobStatus::kCancelled);
}

TEST_F(RuntimeTest, IdempotencyKeyReturnsTheSameJobOrConflicts) {
  JobRecord j;
  j.id = NewId("ftjob");
  j.org_id = org_a_;
  j.idempotency_key = "k1";
  j.request_sha256 = "body-1";
  j.spec = {{"model", "burst-small"}};
  bool created = false;
  std::string first = rt_->Submit(j, &created).value().id;
  EXPECT_TRUE(created);
  j.id = NewId("ftjob");
  EXPECT_EQ(rt_->Submit(j, &created).value().id, first);
  EXPECT_FALSE(created);
  EXPECT_EQ(rt_->QueuedCount() + rt_->LiveWorkerCount(), 2u) << "one queued job, one starting worker";
  j.request_sha256 = "body-2";
  EXPECT_EQ(rt_->Submit(j, &created).status().code(), Code::kAlreadyExists);
  j.org_id = org_b_;  // keys are per organisation
  EXPECT_TRUE(rt_->Submit(j, &created).ok());
  EXPECT_TRUE(created);
}

TEST_F(RuntimeTest, RestartKeepsQueuedJobsAndAdoptsLiveWorkers) {
  opt_.slots = 1;
  Restart();
  std::string running = Submit(org_a_);
  std::string queued = Submit(org_b_);
  std::string w = Register();
  Lease(w);
  clock_.Advance(2000);
  Restart();  // a new control plane on the same database; the worker lives on
  ASSERT_TRUE(rt_->Recover().ok());
  EXPECT_EQ(rt_->LiveWorkerCount(), 1u);
  EXPECT_EQ(rt_->QueuedCount(), 1u);
  EXPECT_EQ(rt_->Heartbeat(w, running, 1, 3).value(), "continue") << "the surviving worker keeps its lease";
  ASSERT_TRUE(rt_->Finish(w, running, 1, "completed", Json(), false, 3, 9).ok());
  EXPECT_EQ(Lease(w)["job"], queued);
  // A second restart after the worker died meanwhile: the attempt is lost.
  exec_.running[w] = false;
  clock_.Advance(5000);
  Restart();
  ASSERT_TRUE(rt_->Recover().ok());
  EXPECT_EQ(rt_->LiveWorkerCount(), 0u);
  rt_->Tick();
  EXPECT_EQ(Job(queued).status, JobStatus::kQueued);
  EXPECT_EQ(Must(md_->ListAttempts(queued))[0].outcome, AttemptOutcome::kLost);
  int64_t total = 0;
  for (auto& s : Must(md_->WorkerUsage(w))) total += s.end_ms - s.start_ms;
  EXPECT_EQ(total, 7000) << "billed until the restarted control plane saw it gone";
}

TEST_F(RuntimeTest, WorkersThatDieBeforeRegisteringAreRestartedWithBackoff) {
  std::string job = Submit(org_a_);
  ASSERT_EQ(exec_.started.size(), 1u);
  exec_.Exit(exec_.started.back().worker_id, "exit 1");
  rt_->Tick();
  EXPECT_EQ(exec_.started.size(), 1u) << "no immediate restart";
  clock_.Advance(500);
  rt_->Tick();
  ASSERT_EQ(exec_.started.size(), 2u);
  exec_.Exit(exec_.started.back().worker_id, "exit 1");
  clock_.Advance(500);
  rt_->Tick();
  EXPECT_EQ(exec_.started.size(), 2u) << "the second failure waits longer";
  clock_.Advance(500);
  rt_->Tick();
  ASSERT_EQ(exec_.started.size(), 3u);
  Lease(Register());
  EXPECT_EQ(Job(job).status, JobStatus::kRunning) << "the job never failed for it";
}

TEST_F(RuntimeTest, SamplingStartsAWorkerAndIsAnsweredAndBilled) {
  auto call = std::make_shared<WorkerCall>();
  call->id = "smpl-1";
  call->org_id = org_b_;
  call->base_model = "/models/base";
  call->task = {{"request", {{"prompt", "hi"}}}};
  std::shared_ptr<WorkerCall> answered;
  std::thread client([&] { answered = rt_->Sample(call, 10'000); });
  ASSERT_TRUE(WaitFor([&] { return rt_->LiveWorkerCount() == 1; }));  // the client thread queued it
  clock_.Advance(700);
  std::string w = Register();
  Json task = Lease(w);
  EXPECT_EQ(task["kind"], "sample");
  EXPECT_EQ(task["id"], "smpl-1");
  EXPECT_EQ(task["model"], "/models/base");
  clock_.Advance(300);
  ASSERT_TRUE(rt_->SampleResult(w, "smpl-1", Answer("hello"), Json()).ok());
  client.join();
  ASSERT_TRUE(answered->done);
  EXPECT_TRUE(answered->error.ok()) << answered->error.ToString();
  EXPECT_EQ(answered->result["samples"][0]["text"], "hello");
  EXPECT_TRUE(answered->cold);
  EXPECT_EQ(rt_->SampleResult(w, "smpl-1", Json(), Json()).code(), Code::kFailedPrecondition)
      << "answered once";
  auto segs = Must(md_->WorkerUsage(w));
  ASSERT_EQ(segs.size(), 2u);
  EXPECT_EQ(segs[0].line, UsageLine::kSampling) << "a sampling call's cold start is billed to the call";
  EXPECT_EQ(segs[0].job_id, "smpl-1");
  EXPECT_EQ(segs[1].line, UsageLine::kSampling);
  EXPECT_EQ(segs[1].org_id, org_b_);
  EXPECT_EQ(segs[1].end_ms - segs[1].start_ms, 300);
}

TEST_F(RuntimeTest, SamplingWithEverySlotBusyAnswersCapacity) {
  Submit(org_a_);
  std::string w = Register();
  Lease(w);  // the only slot trains
  auto call = std::make_shared<WorkerCall>();
  call->id = "smpl-2";
  call->org_id = org_b_;
  call->base_model = "burst-small";
  auto r = rt_->Sample(call, 0);
  EXPECT_EQ(r->error.code(), Code::kResourceExhausted);
  EXPECT_EQ(r->error.reason(), "capacity");
  EXPECT_EQ(r->error.param(), "");
  EXPECT_EQ(exec_.started.size(), 1u);
}

TEST_F(RuntimeTest, AnOrganisationOverItsCapGetsOrgCapNotAQueue) {
  opt_.max_active_jobs_per_org = 2;
  Restart();
  Submit(org_a_);
  Submit(org_a_);
  JobRecord j;
  j.id = NewId("ftjob");
  j.org_id = org_a_;
  j.request_sha256 = "x";
  j.spec = {{"model", "burst-small"}};
  bool created = true;
  auto over = rt_->Submit(j, &created);
  EXPECT_EQ(over.status().code(), Code::kResourceExhausted);
  EXPECT_EQ(over.status().reason(), "org_cap");
  EXPECT_EQ(over.status().param(), "max_active_jobs");
  EXPECT_FALSE(created);
  Submit(org_b_);  // another organisation is not affected
}

TEST_F(RuntimeTest, ATaskAssignedToALeavingWorkerGoesBackAtNoCost) {
  std::string j1 = Submit(org_a_);
  std::string w = Register();
  Lease(w);
  ASSERT_TRUE(rt_->Finish(w, j1, 1, "completed", Json(), false, 1, 1).ok());
  std::string j2 = Submit(org_a_);  // assigned to the idle worker at once ...
  ASSERT_TRUE(rt_->WorkerExiting(w, "scaledown window passed").ok());  // ... which was deciding to leave
  JobRecord j = Job(j2);
  EXPECT_EQ(j.status, JobStatus::kQueued);
  EXPECT_EQ(j.retries, 0) << "never delivered: no retry spent";
  exec_.Exit(w);
  clock_.Advance(10);
  rt_->Tick();
  ASSERT_EQ(exec_.started.size(), 2u) << "a new worker for it";
  EXPECT_EQ(Lease(Register())["job"], j2);
  EXPECT_EQ(Job(j2).retries, 0);
}

TEST_F(RuntimeTest, WithNoFreeSlotEverythingWaitsInTheQueue) {
  opt_.slots = 0;  // nothing can start: everything stays queued
  Restart();
  for (int i = 0; i < 2000; ++i) Submit(i % 3 == 0 ? org_b_ : org_a_);
  EXPECT_EQ(rt_->QueuedCount(), 2000u);
  EXPECT_EQ(exec_.started.size(), 0u);
}

// ---------------------------------------------------------------------------
// deployments

TEST_F(RuntimeTest, ADeploymentScalesFromZeroUpUnderLoadAndBackToZero) {
  opt_.slots = 3;
  Restart();
  bool created = false;
  DeploymentRecord d = Must(rt_->CreateDeployment(
      Dep(org_a_, "support",
          {{"min_replicas", 0}, {"max_replicas", 2}, {"scaledown_window_s", 30}, {"max_concurrency", 1}}),
      &created));
  ASSERT_TRUE(created);
  EXPECT_EQ(exec_.started.size(), 0u) << "min_replicas 0: nothing runs until a call comes";

  std::shared_ptr<WorkerCall> a1, a2;
  std::thread c1([&] { a1 = rt_->Sample(DepCall(org_a_, d.id, "c1"), 10'000); });
  ASSERT_TRUE(WaitFor([&] { return rt_->LiveWorkerCount() == 1; }));
  clock_.Advance(500);
  std::string w1 = Register();
  Json t1 = Lease(w1);
  EXPECT_EQ(t1["id"], "c1") << "the call that started the replica is its first task";
  // A second call while the only replica is busy: a second replica.
  std::thread c2([&] { a2 = rt_->Sample(DepCall(org_a_, d.id, "c2"), 10'000); });
  ASSERT_TRUE(WaitFor([&] { return rt_->LiveWorkerCount() == 2; }));
  clock_.Advance(500);
  std::string w2 = Register();
  EXPECT_EQ(Lease(w2)["id"], "c2");
  clock_.Advance(200);
  ASSERT_TRUE(rt_->SampleResult(w1, "c1", Answer("x"), Json()).ok());
  ASSERT_TRUE(rt_->SampleResult(w2, "c2", Answer("y"), Json()).ok());
  c1.join();
  c2.join();
  EXPECT_TRUE(a1->error.ok() && a2->error.ok());
  EXPECT_TRUE(a1->cold);
  EXPECT_TRUE(a2->cold);
  EXPECT_EQ(Must(md_->GetDeployment(org_a_, "support")).requests, 2);
  // Idle replicas hold (their own scaledown window does not apply) ...
  EXPECT_EQ(Lease(w1, "/models/base")["action"], "hold");
  // ... and a training job does not take one.
  Submit(org_b_);
  EXPECT_EQ(exec_.started.size(), 3u) << "the job got a worker of its own";
  clock_.Advance(29'000);
  rt_->Tick();
  EXPECT_TRUE(exec_.stopped.empty()) << "inside the window";
  clock_.Advance(2'000);
  rt_->Tick();
  EXPECT_EQ(exec_.stopped.size(), 2u) << "both replicas go after the window (min_replicas 0)";
  clock_.Advance(100);
  exec_.Exit(w1);
  exec_.Exit(w2);
  rt_->Tick();
  EXPECT_EQ(rt_->DeploymentState(d.id, BillingScope::kDedicated)["replicas"].size(), 0u);
  // Every millisecond of a replica's life is the deployment's.
  for (const std::string& w : {w1, w2}) {
    int64_t billed = 0;
    for (const UsageRecord& u : Must(md_->WorkerUsage(w))) {
      EXPECT_EQ(u.line, UsageLine::kDeployment);
      EXPECT_EQ(u.job_id, d.id);
      EXPECT_EQ(u.org_id, org_a_);
      billed += u.end_ms - u.start_ms;
    }
    WorkerRecord rec;
    for (const WorkerRecord& r : Must(md_->ListWorkers(false)))
      if (r.id == w) rec = r;
    EXPECT_EQ(billed, rec.exited_ms - rec.requested_ms) << w;
  }
}

TEST_F(RuntimeTest, ADeploymentIsIdempotentByNameKeepsMinReplicasAndDeleteStopsThem) {
  opt_.slots = 2;
  Restart();
  Json req = {{"min_replicas", 1}, {"max_replicas", 1}, {"scaledown_window_s", 5}, {"max_concurrency", 4}};
  bool created = false;
  DeploymentRecord d = Must(rt_->CreateDeployment(Dep(org_a_, "bot", req), &created));
  ASSERT_TRUE(created);
  ASSERT_EQ(exec_.started.size(), 1u) << "min_replicas 1 starts one at once";
  DeploymentRecord again = Dep(org_a_, "bot", req);
  EXPECT_EQ(Must(rt_->CreateDeployment(again, &created)).id, d.id);
  EXPECT_FALSE(created);
  Json other = req;
  other["max_replicas"] = 2;
  auto conflict = rt_->CreateDeployment(Dep(org_a_, "bot", other), &created);
  EXPECT_EQ(conflict.status().code(), Code::kAlreadyExists);
  EXPECT_EQ(conflict.status().param(), "name");
  EXPECT_TRUE(Must(rt_->CreateDeployment(Dep(org_b_, "bot", other), &created)).id != d.id)
      << "names are per organisation";
  std::string w = exec_.started[0].worker_id;
  ASSERT_TRUE(rt_->Register(w, 0).ok());
  Json warm = Lease(w);
  EXPECT_EQ(warm["kind"], "warm") << "a replica with no call yet loads its checkpoint";
  EXPECT_EQ(warm["checkpoint_prefix"], d.target["checkpoint_prefix"]);
  const auto ready = [&] {
    return rt_->DeploymentState(d.id, BillingScope::kDedicated)["replicas"][0]["ready"];
  };
  EXPECT_EQ(ready(), false) << "sent its checkpoint, not yet loaded";
  // Ready once its lease says it holds the deployment's checkpoint; another
  // checkpoint or the base model alone does not count.
  EXPECT_EQ(Lease(w, "/models/base", {"orgs/x/jobs/y/checkpoints/step-00000001/sampler/"})["action"], "hold");
  EXPECT_EQ(ready(), false);
  EXPECT_EQ(Lease(w, "/models/base", {d.target["checkpoint_prefix"].get<std::string>()})["action"], "hold");
  EXPECT_EQ(ready(), true);
  EXPECT_EQ(Lease(w, "/models/base")["action"], "hold");
  EXPECT_EQ(ready(), false) << "it says what it holds on every lease";
  clock_.Advance(60'000);
  rt_->Tick();
  std::vector<std::string> stopped = exec_.stopped;
  EXPECT_EQ(std::count(stopped.begin(), stopped.end(), w), 0) << "min_replicas keeps it past the window";
  clock_.Advance(1000);
  auto gone = Must(rt_->DeleteDeployment(org_a_, "bot"));
  EXPECT_GT(gone.deleted_at, 0);
  stopped = exec_.stopped;
  EXPECT_EQ(std::count(stopped.begin(), stopped.end(), w), 1) << "delete stops the replica at once";
  EXPECT_EQ(Lease(w)["action"], "exit");
  auto late = rt_->Sample(DepCall(org_a_, d.id, "late"), 0);
  EXPECT_EQ(late->error.code(), Code::kNotFound);
  EXPECT_EQ(Must(md_->GetDeployment(org_a_, d.id)).deleted_at, gone.deleted_at) << "still readable by id";
  EXPECT_EQ(md_->GetDeployment(org_a_, "bot").status().code(), Code::kNotFound) << "the name is free again";
}

TEST_F(RuntimeTest, DeploymentsOverTheOrganisationCapAreOrgCap) {
  opt_.max_deployments_per_org = 1;
  opt_.slots = 0;
  Restart();
  bool created = false;
  Must(rt_->CreateDeployment(Dep(org_a_, "one", {{"max_replicas", 1}}), &created));
  auto over = rt_->CreateDeployment(Dep(org_a_, "two", {{"max_replicas", 1}}), &created);
  EXPECT_EQ(over.status().code(), Code::kResourceExhausted);
  EXPECT_EQ(over.status().reason(), "org_cap");
  EXPECT_EQ(over.status().param(), "max_deployments");
  EXPECT_TRUE(rt_->CreateDeployment(Dep(org_a_, "one", {{"max_replicas", 1}}), &created).ok())
      << "the same deployment again is not a new one";
}

}  // namespace
}  // namespace burst
