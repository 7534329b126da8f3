// Recovery after a control-plane restart: deployments and the worker pool
// come back from the database (workers still alive are adopted by pid, the
// others are billed until now, when their exit is observed), running
// attempts get one lease TTL for their worker to report again, and queued
// jobs return to their queues in order.
#include "runtime/runtime.h"
#include "runtime/runtime_internal.h"

namespace burst {
using namespace runtime_internal;

Status Runtime::Recover() {
  std::lock_guard<std::mutex> lock(mu_);
  const int64_t now = clock_.NowMs();
  auto deps = md_.ListDeployments("", /*include_deleted=*/false);
  if (!deps.ok()) return deps.status();
  for (const DeploymentRecord& d : deps.value()) {
    if (Status s = AddDeployment(d); !s.ok()) return s;
  }
  auto workers = md_.ListWorkers(true);
  if (!workers.ok()) return workers.status();
  for (WorkerRecord& r : workers.value()) {
    Worker w;
    w.rec = r;
    w.idle_since_ms = now;
    if (IsLive(r.state)) {
      if (exec_.Adopt(r.id, r.pid)) {
        if (w.rec.state == WorkerState::kBusy &&
            w.rec.job_id.empty()) {  // it was sampling: that call is gone
          meter_.Switch(w.rec, w.usage, now, UsageLine::kIdle, w.rec.last_org, "");
          w.rec.state = WorkerState::kIdle;
          SaveWorker(w).IgnoreError(kKept);
        }
        // Busy with a job: if that attempt is over (below, or ended while
        // the control plane was down), its next lease frees it.
        w.member = w.rec.state == WorkerState::kBusy && !w.rec.job_id.empty();
        tokens_.Add(w.rec.token_sha256, r.id);
        workers_.Add(std::move(w));
        continue;
      }
    }
    // Gone while no control plane watched: billed until now, when its exit
    // was observed.
    meter_.Switch(w.rec, w.usage, now, std::nullopt, "", "");
    w.rec.state = WorkerState::kExited;
    w.rec.exited_ms = now;
    w.rec.exit_reason = "gone while the control plane was down";
    meter_.SaveExited(w.rec, std::move(w.usage));
  }
  auto open = md_.ListOpenAttempts();
  if (!open.ok()) return open.status();
  std::map<std::string, AttemptRecord> open_by_job;
  for (auto& a : open.value()) open_by_job[a.job_id] = a;
  auto active = md_.ListActiveJobs();
  if (!active.ok()) return active.status();
  std::set<std::string> seen;
  auto load = [&](const JobRecord& job) -> Status {
    Task t;
    t.job_id = job.id;
    t.org_id = job.org_id;
    t.model = job.spec.value("base_model", job.spec.value("model", ""));
    t.model_name = job.spec.value("model", "");
    if (Status s = SetTaskBilling(t, job); !s.ok()) return s;
    // A gang's size is what it asked for, even over a smaller --slots now
    // (it then waits; the operator sees it queued).
    SetGang(t, job).IgnoreError("a recovered job keeps what it was accepted with");
    t.seq = jobs_.NextSeq();
    t.enqueued_ms = clock_.NowMs();
    t.not_before_ms = job.not_before_ms;
    t.timeout_ms = static_cast<int64_t>(job.spec.value("timeout_s", 0.0) * 1000);
    t.run_ms_before = static_cast<int64_t>(job.run_seconds * 1000);
    t.step = job.step;
    auto a = open_by_job.find(job.id);
    if (a != open_by_job.end()) {
      // Running when the control plane stopped: its worker gets one lease
      // TTL to come back; otherwise the attempt is lost and requeued.
      t.worker = a->second.worker_id;
      t.attempt = a->second.attempt;
      t.attempt_start_ms = a->second.started_ms;
      t.lease_until_ms = now + opt_.lease_ttl_ms;
      t.delivered = true;
      if (IsTerminal(job.status) || job.status == JobStatus::kPaused) {
        // Ended while the control plane was down: a failed job timed out
        // (a worker's own failure ends its attempt too), a paused one
        // stops as a preemption does, else it was cancelled.
        t.end_as = job.status == JobStatus::kFailed   ? AttemptOutcome::kTimeout
                   : job.status == JobStatus::kPaused ? AttemptOutcome::kPreempted
                                                      : AttemptOutcome::kCancelled;
        t.cancel = true;
        t.cancel_at_ms = now;
      }
      const bool gang = t.gang.size() > 1 && !t.end_as;
      Task& kept = jobs_.AdoptRunning(std::move(t));
      if (gang) {
        // Its members' ranks were not written down: the gang starts again
        // from the last state checkpoint, at no cost to its retries.
        return EndAttempt(kept, now, AttemptOutcome::kLost,
                          ErrorJson("restarted", "the control plane restarted during a multi-worker attempt"),
                          true, false);
      }
    } else if (!IsTerminal(job.status) &&
               job.status != JobStatus::kPaused) {  // a paused job waits for its resume
      if (job.status != JobStatus::kQueued) {
        JobRecord q = job;
        q.status = JobStatus::kQueued;
        if (Status s = md_.UpdateJob(q); !s.ok()) return s;
      }
      jobs_.Enqueue(std::move(t));
    }
    return Status();
  };
  for (const JobRecord& job : active.value()) {
    seen.insert(job.id);
    if (Status s = load(job); !s.ok()) return s;
  }
  for (auto& [job_id, a] : open_by_job) {
    if (seen.count(job_id)) continue;
    auto rec = md_.GetJobById(job_id);
    if (!rec.ok() && rec.status().code() == Code::kNotFound)
      continue;  // an attempt of no job: nothing to run
    if (!rec.ok()) return rec.status();
    if (Status s = load(rec.value()); !s.ok()) return s;
  }
  return Status();
}

}  // namespace burst
