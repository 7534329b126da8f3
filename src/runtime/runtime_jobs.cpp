// Jobs: Submit and SubmitSweep (the organisation's cap on active jobs is
// checked here, under the scheduler's lock), Cancel, and the end of an
// attempt (EndAttempt decides between requeue with backoff and the job's
// end; FinishJob writes a terminal status). The ended attempt is the commit
// point: once its row is written the scheduler's memory follows it, and a
// later failed write of the job is logged and returned (Recover requeues a
// job left running without an open attempt).
#include <algorithm>

#include "runtime/runtime.h"
#include "runtime/runtime_internal.h"

namespace burst {
using namespace runtime_internal;

int Runtime::ActiveJobs(const std::string& org_id) {
  auto writing = submitting_by_org_.find(org_id);
  return jobs_.Active(org_id) + (writing == submitting_by_org_.end() ? 0 : writing->second);
}

// Group commit: the submission joins the waiting ones; whichever thread
// finds no batch being written writes all that wait, in one transaction
// (one flush to disk for many jobs) and without the scheduler's lock, so
// dispatch and heartbeats go on meanwhile. The cap counts waiting jobs.
Result<JobRecord> Runtime::Submit(JobRecord job, bool* created) {
  std::unique_lock<std::mutex> lock(mu_);
  *created = false;
  if (auto replay = OverCap(job); !replay.ok() || replay.value()) {
    if (!replay.ok()) return replay.status();
    return *replay.value();
  }
  job.status = JobStatus::kQueued;
  auto p = std::make_shared<PendingSubmit>();
  // Its billing first: a spec whose scope cannot be read creates nothing.
  if (Status s = SetTaskBilling(p->task, job); !s.ok()) return s;
  if (Status s = SetGang(p->task, job); !s.ok()) return s;
  p->entry.events = FirstEvents(job);
  ++submitting_by_org_[job.org_id];
  p->entry.job = std::move(job);
  submits_.push_back(p);
  while (!p->done) {
    if (!committing_) {
      CommitSubmits(lock);
    } else {
      submit_cv_.wait(lock);
    }
  }
  *created = p->entry.created;
  return std::move(p->entry.result);
}

Result<std::optional<JobRecord>> Runtime::OverCap(const JobRecord& job) {
  if (opt_.max_active_jobs_per_org <= 0) return std::optional<JobRecord>();
  const int active = ActiveJobs(job.org_id);
  if (active < opt_.max_active_jobs_per_org) return std::optional<JobRecord>();
  // A replay of an accepted request is not a new job.
  if (!job.idempotency_key.empty()) {
    auto prev = md_.IdempotentReplay(job.org_id, job.idempotency_key, job.request_sha256);
    if (!prev.ok()) return prev.status();
    if (prev.value()) return prev.value();
  }
  return Status(Code::kResourceExhausted,
                "your organisation has " + std::to_string(active) + " jobs queued or running, its limit (" +
                    std::to_string(opt_.max_active_jobs_per_org) + "); wait for one to end",
                "max_active_jobs", "org_cap");
}

std::vector<EventRecord> Runtime::FirstEvents(const JobRecord& job) {
  const TaskKind kind = job.kind();
  std::vector<EventRecord> first(2);
  first[0].message = (kind == TaskKind::kEval    ? "Created evaluation "
                      : kind == TaskKind::kBatch ? "Created batch "
                                                 : "Created fine-tuning job ") +
                     job.id;
  first[1].message = kind == TaskKind::kEval ? "Validated eval file " + job.spec.value("eval_file", "")
                     : kind == TaskKind::kBatch
                         ? "Validated batch input file " + job.spec.value("input_file_id", "")
                         : "Validated training file " + job.spec.value("training_file", "");
  return first;
}

void Runtime::QueueCreated(Task t, const JobRecord& j) {
  t.job_id = j.id;
  t.org_id = j.org_id;
  t.model = j.spec.value("base_model", j.spec.value("model", ""));
  t.model_name = j.spec.value("model", "");
  t.seq = jobs_.NextSeq();
  t.enqueued_ms = clock_.NowMs();
  t.timeout_ms = static_cast<int64_t>(j.spec.value("timeout_s", 0.0) * 1000);
  jobs_.Enqueue(std::move(t));
}

void Runtime::CommitSubmits(std::unique_lock<std::mutex>& lock) {
  committing_ = true;
  std::vector<std::shared_ptr<PendingSubmit>> batch;
  batch.swap(submits_);
  std::vector<Metadata::NewJob> entries;
  entries.reserve(batch.size());
  for (auto& p : batch) entries.push_back(std::move(p->entry));
  lock.unlock();
  // Its own answer per entry; a failed transaction wrote none of them. A
  // throw (a spec that cannot be written) fails the batch the same way,
  // and never leaves the waiters without a writer.
  Status thrown = Try(
      [&] { md_.CreateJobs(entries).IgnoreError("each entry's result carries the transaction's failure"); });
  lock.lock();
  if (!thrown.ok()) {
    for (auto& e : entries) {
      e.created = false;
      e.result = thrown;
    }
  }
  for (size_t i = 0; i < batch.size(); ++i) {
    PendingSubmit& p = *batch[i];
    p.entry = std::move(entries[i]);
    if (--submitting_by_org_[p.entry.job.org_id] == 0) submitting_by_org_.erase(p.entry.job.org_id);
    if (p.entry.created) QueueCreated(std::move(p.task), p.entry.result.value());
    p.done = true;
  }
  const int64_t now = clock_.NowMs();
  while (DispatchOne(now)) {
  }
  committing_ = false;
  submit_cv_.notify_all();
}

// One job of a sweep, written at once under mu_ (SubmitSweep checked the
// cap for all of them).
Result<JobRecord> Runtime::SubmitLocked(JobRecord job, bool* created) {
  *created = false;
  job.status = JobStatus::kQueued;
  // Its billing first: a spec whose scope cannot be read creates nothing.
  Task t;
  if (Status s = SetTaskBilling(t, job); !s.ok()) return s;
  if (Status s = SetGang(t, job); !s.ok()) return s;
  const std::vector<EventRecord> first = FirstEvents(job);
  auto rec = md_.CreateJob(std::move(job), created, first);
  if (!rec.ok() || !*created) return rec;
  QueueCreated(std::move(t), rec.value());
  const int64_t now = clock_.NowMs();
  while (DispatchOne(now)) {
  }
  return rec;
}

Result<SweepRecord> Runtime::SubmitSweep(SweepRecord sweep, std::vector<JobRecord> jobs, bool* created) {
  std::lock_guard<std::mutex> lock(mu_);
  *created = false;
  if (jobs.size() != sweep.runs.size()) {
    return Status(Code::kInvalidArgument,
                  "runs: the sweep has " + std::to_string(sweep.runs.size()) + " runs but " +
                      std::to_string(jobs.size()) + " jobs were given",
                  "runs");
  }
  const std::string org = sweep.org_id;
  std::optional<SweepRecord> prev;
  if (!sweep.idempotency_key.empty()) {
    auto found = md_.FindSweepByKey(org, sweep.idempotency_key);
    if (!found.ok()) return found.status();
    prev = std::move(found).value();
  }
  // What this request adds: every job of a new sweep; of a replay, the jobs
  // an interrupted request did not get to create (another body under the
  // same key is refused by CreateSweep below, adding nothing).
  int64_t adding = 0;
  if (!prev) {
    adding = static_cast<int64_t>(jobs.size());
  } else if (prev->request_sha256 == sweep.request_sha256 && !prev->cancelled_at) {
    for (size_t i = 0; i < jobs.size() && i < prev->runs.size(); ++i) {
      auto made = md_.IdempotentReplay(org, prev->id + "/" + std::to_string(i), jobs[i].request_sha256);
      if (!made.ok()) return made.status();
      adding += !made.value().has_value();
    }
  }
  if (const int cap = opt_.max_active_jobs_per_org; cap > 0 && adding > 0) {
    const int active = ActiveJobs(org);
    if (active + adding > cap) {
      return Status(Code::kResourceExhausted,
                    "this sweep's " + std::to_string(adding) + " jobs and your organisation's " +
                        std::to_string(active) + " queued or running would pass its limit (" +
                        std::to_string(cap) + "); wait for jobs to end, or sweep fewer points",
                    "max_active_jobs", "org_cap");
    }
  }
  auto rec = md_.CreateSweep(std::move(sweep), created);
  if (!rec.ok()) return rec.status();
  const SweepRecord& sw = rec.value();
  // Each job is idempotent on (sweep, index): a replay creates only what an
  // interrupted request did not. The cap was checked for all of them above.
  for (size_t i = 0; !sw.cancelled_at && i < jobs.size() && i < sw.runs.size(); ++i) {
    JobRecord job = std::move(jobs[i]);
    job.id = sw.runs[i].value("job_id", "");
    job.org_id = org;
    job.idempotency_key = sw.id + "/" + std::to_string(i);
    job.spec["sweep_id"] = sw.id;
    bool job_created = false;
    auto j = SubmitLocked(std::move(job), &job_created);
    if (j.ok()) continue;
    if (*created) {
      // A new sweep is created whole or not at all: what exists is cancelled.
      const int64_t at = clock_.NowMs() / 1000;
      auto marked = md_.CancelSweep(org, sw.id, at);
      if (!marked.ok()) LogFailure("cannot cancel the half-created sweep " + sw.id, marked.status());
      for (size_t k = 0; k < i; ++k) {
        const std::string id = sw.runs[k].value("job_id", "");
        auto c = CancelLocked(org, id);
        if (!c.ok())
          LogFailure("cannot cancel job " + id + " of the half-created sweep " + sw.id, c.status());
      }
    }
    return j.status();
  }
  return rec;
}

Result<JobRecord> Runtime::Cancel(const std::string& org_id, const std::string& job_id) {
  std::lock_guard<std::mutex> lock(mu_);
  return CancelLocked(org_id, job_id);
}

Result<JobRecord> Runtime::CancelLocked(const std::string& org_id, const std::string& job_id) {
  auto rec = md_.GetJob(org_id, job_id);
  if (!rec.ok()) return rec;
  JobRecord job = rec.value();
  if (IsTerminal(job.status)) {
    return Status(Code::kFailedPrecondition,
                  "job " + job_id + " has already " + std::string(ToString(job.status)), "job_id");
  }
  const int64_t now = clock_.NowMs();
  if (Status s = FinishJob(job, JobStatus::kCancelled, Json(), now); !s.ok()) return s;
  Task* found = jobs_.Find(job_id);
  if (found == nullptr) return job;
  Task& t = *found;
  if (t.worker.empty()) {
    jobs_.Unqueue(t.org_id, job_id);
    jobs_.Erase(job_id);
  } else if (!t.AnyDelivered()) {
    if (Status s = TakeBack(t, now, AttemptOutcome::kCancelled); !s.ok()) return s;
  } else {
    t.cancel = true;
    t.end_as = AttemptOutcome::kCancelled;
    t.cancel_at_ms = now;
  }
  return job;
}

Status Runtime::TakeBack(Task& t, int64_t now, AttemptOutcome outcome) {
  const std::vector<std::string> ids = t.WorkerIds();
  if (Status s = EndAttempt(t, now, outcome, Json(), false, false); !s.ok()) return s;  // `t` is gone
  for (const std::string& id : ids) {
    auto w = workers_.find(id);
    if (w == workers_.end()) continue;
    w->second.rec.state = WorkerState::kIdle;
    w->second.rec.job_id.clear();
    w->second.idle_since_ms = now;
    w->second.member = false;
    w->second.drain_since_ms = 0;
    meter_.Switch(w->second.rec, w->second.usage, now, UsageLine::kIdle, w->second.rec.last_org, "");
    SaveWorker(w->second).IgnoreError(kKept);
  }
  return Status();
}

Result<JobRecord> Runtime::Pause(const std::string& org_id, const std::string& job_id) {
  std::lock_guard<std::mutex> lock(mu_);
  auto rec = md_.GetJob(org_id, job_id);
  if (!rec.ok()) return rec;
  JobRecord job = rec.value();
  if (job.status != JobStatus::kQueued && job.status != JobStatus::kRunning) {
    return Status(Code::kFailedPrecondition,
                  "job " + job_id + " is " + std::string(ToString(job.status)) +
                      "; only a queued or running job pauses",
                  "job_id");
  }
  if (job.kind() != TaskKind::kTrain) {
    return Status(Code::kFailedPrecondition,
                  "job " + job_id + " is an evaluation; only fine-tuning jobs pause", "job_id");
  }
  const int64_t now = clock_.NowMs();
  job.status = JobStatus::kPaused;
  if (Status s = md_.UpdateJob(job); !s.ok()) return s;
  if (Task* found = jobs_.Find(job_id); found != nullptr) {
    Task& t = *found;
    if (t.worker.empty()) {
      jobs_.Unqueue(t.org_id, job_id);
      jobs_.Erase(job_id);
    } else if (!t.AnyDelivered()) {
      if (Status s = TakeBack(t, now, AttemptOutcome::kPreempted); !s.ok()) return s;
    } else {
      // Stopped as a cancel stops it (the worker checkpoints its state on
      // the way out); its attempt ends preempted, and nothing requeues it.
      t.cancel = true;
      t.end_as = AttemptOutcome::kPreempted;
      t.cancel_at_ms = now;
    }
  }
  AddEvent(md_, job_id,
           "The job was paused" +
               std::string(job.resume_step ? "; it resumes from step " + std::to_string(job.resume_step)
                                           : "; it resumes from its next state checkpoint, or the start"));
  return job;
}

Result<JobRecord> Runtime::Resume(const std::string& org_id, const std::string& job_id) {
  std::lock_guard<std::mutex> lock(mu_);
  auto rec = md_.GetJob(org_id, job_id);
  if (!rec.ok()) return rec;
  JobRecord job = rec.value();
  if (job.status != JobStatus::kPaused) {
    return Status(
        Code::kFailedPrecondition,
        "job " + job_id + " is " + std::string(ToString(job.status)) + "; only a paused job resumes",
        "job_id");
  }
  if (jobs_.Find(job_id) != nullptr) {
    return Status(Code::kFailedPrecondition,
                  "job " + job_id + " is still stopping its paused attempt; resume it once that has ended",
                  "job_id");
  }
  if (const int cap = opt_.max_active_jobs_per_org; cap > 0 && ActiveJobs(org_id) >= cap) {
    return Status(Code::kResourceExhausted,
                  "your organisation has " + std::to_string(ActiveJobs(org_id)) +
                      " jobs queued or running, its limit (" + std::to_string(cap) + "); resume " + job_id +
                      " once one has ended",
                  "max_active_jobs", "org_cap");
  }
  Task t;
  t.run_ms_before = static_cast<int64_t>(job.run_seconds * 1000);
  t.step = job.step;
  if (Status s = SetTaskBilling(t, job); !s.ok()) return s;
  if (Status s = SetGang(t, job); !s.ok()) return s;
  job.status = JobStatus::kQueued;
  job.not_before_ms = 0;
  if (Status s = md_.UpdateJob(job); !s.ok()) return s;
  QueueCreated(std::move(t), job);
  AddEvent(
      md_, job_id,
      "The job was resumed" +
          std::string(job.resume_step ? "; it goes on from step " + std::to_string(job.resume_step) : ""));
  const int64_t now = clock_.NowMs();
  while (DispatchOne(now)) {
  }
  return job;
}

Status Runtime::FinishJob(JobRecord& job, JobStatus status, const Json& error, int64_t now) {
  job.status = status;
  job.error = error;
  job.finished_at = now / 1000;
  if (Status s = md_.UpdateJob(job); !s.ok()) return s;
  std::string msg = status == JobStatus::kSucceeded ? "The job has successfully completed"
                    : status == JobStatus::kCancelled
                        ? "The job was cancelled"
                        : "The job failed: " + error.value("message", std::string("unknown error"));
  AddEvent(md_, job.id, msg, status == JobStatus::kFailed ? "error" : "info");
  return Status();
}

Status Runtime::EndAttempt(Task& t, int64_t now, AttemptOutcome outcome, const Json& error, bool retry,
                           bool costs_retry) {
  const std::string job_id = t.job_id;
  auto rec = md_.GetJobById(job_id);
  if (!rec.ok()) return rec.status();
  // Nothing has changed while this write may still fail: the caller may
  // simply try again (the tick does).
  if (Status s = md_.EndAttempt(job_id, t.attempt, now, outcome, error); !s.ok()) return s;
  jobs_.Stopped(t);
  DrainGang(t, now);  // the other members learn it from their next report
  JobRecord job = rec.value();
  job.run_seconds += static_cast<double>(now - t.attempt_start_ms) / 1000.0;
  t.run_ms_before += now - t.attempt_start_ms;
  if (!retry || IsTerminal(job.status)) {
    jobs_.Erase(job_id);
    return md_.UpdateJob(job);
  }
  const int64_t max_retries = job.spec.value("max_retries", int64_t{3});
  if (costs_retry) Metrics::Default().Add("burst_job_retries_total");
  if (costs_retry && ++job.retries > max_retries) {
    const int64_t attempt = t.attempt;
    jobs_.Erase(job_id);  // `t` is gone from here on
    return FinishJob(
        job, JobStatus::kFailed,
        ErrorJson("retries_exhausted", "attempt " + std::to_string(attempt) + " ended " +
                                           std::string(ToString(outcome)) + " (" +
                                           error.value("message", std::string("no detail")) + "); " +
                                           std::to_string(max_retries) + " retries already spent"),
        now);
  }
  const int64_t backoff =
      costs_retry ? std::min<int64_t>(60'000, 1000LL << std::min<int64_t>(job.retries - 1, 6)) : 0;
  job.status = JobStatus::kQueued;
  job.not_before_ms = now + backoff;
  // Requeued in memory whatever the write does: the attempt is over.
  Task copy = t;
  copy.not_before_ms = job.not_before_ms;
  copy.seq = jobs_.NextSeq();
  copy.enqueued_ms = now;
  const int64_t attempt = t.attempt;
  jobs_.Enqueue(std::move(copy));  // replaces `t`
  if (Status s = md_.UpdateJob(job); !s.ok()) return s;
  AddEvent(md_, job_id,
           "Attempt " + std::to_string(attempt) + " " + std::string(ToString(outcome)) +
               (error.is_object() ? ": " + error.value("message", std::string()) : std::string()) +
               "; requeued" + (backoff ? " (retry in " + std::to_string(backoff / 1000) + " s)" : "") +
               (job.resume_step ? ", resuming from step " + std::to_string(job.resume_step) : ""),
           costs_retry ? "warn" : "info");
  return Status();
}

}  // namespace burst
