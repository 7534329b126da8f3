// The workers' protocol (/internal/v1): Register, the Lease long poll that
// hands a worker its next task, sampling call or checkpoint to warm,
// Heartbeat (renews the lease; answers "cancel"), Events, Checkpoint,
// Finish, WorkerExiting, and ObserveExit for exits the executor saw. A
// report about an attempt that is no longer the worker's is refused with
// reason lease_lost (409), and the worker drops the task.
#include <algorithm>
#include <cstdio>

#include "core/checkpoint_names.h"
#include "core/fs.h"
#include "runtime/runtime.h"
#include "runtime/runtime_internal.h"

namespace burst {
using namespace runtime_internal;

Result<Runtime::Task*> Runtime::RunningTask(const std::string& worker_id, const std::string& job_id,
                                            int64_t attempt, int* rank) {
  Task* it = jobs_.Find(job_id);
  const int r = it == nullptr ? -1 : it->RankOf(worker_id);
  if (r < 0 || it->attempt != attempt || !jobs_.IsRunning(job_id) || !it->OnAttempt(r)) {
    return LeaseLost("attempt " + std::to_string(attempt) + " of " + job_id + " is no longer leased to " +
                     worker_id);
  }
  if (rank) *rank = r;
  return &*it;
}

void Runtime::StopWorker(Worker& w, const std::string& reason, int64_t grace_ms) {
  w.rec.state = WorkerState::kStopping;
  w.rec.exit_reason = reason;
  w.rec.since_ms = clock_.NowMs();
  SaveWorker(w).IgnoreError(kKept);
  exec_.Stop(w.rec.id, grace_ms);
  cv_.notify_all();  // its long poll answers "exit"
}

Result<std::string> Runtime::AuthenticateWorker(const std::string& token) {
  // Without the scheduler's lock (worker_tokens.h).
  std::optional<std::string> id = tokens_.Find(Sha256Hex(token));
  if (!id) return Status(Code::kNotFound, "unknown worker token", "authorization");
  return *std::move(id);
}

Result<Json> Runtime::Register(const std::string& worker_id, int64_t pid, int64_t process_started_ms,
                               const BlasFacts& blas, const std::string& device) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = workers_.find(worker_id);
  if (it == workers_.end()) return Status(Code::kNotFound, "no worker " + worker_id, "worker");
  Worker& w = it->second;
  if (!device.empty() && device != w.rec.device) {
    return Status(
        Code::kFailedPrecondition,
        "worker " + worker_id + " says it runs on " + device + " but was started for " + w.rec.device,
        "device");
  }
  w.blas = blas;
  const int64_t now = clock_.NowMs();
  if (w.rec.state == WorkerState::kStarting) {
    workers_.StartWorked();
    // Queue time ends when the process started (clamped to what this
    // control plane saw); the ledger's segment starts there.
    const int64_t began =
        std::clamp(process_started_ms > 0 ? process_started_ms : w.rec.requested_ms, w.rec.requested_ms, now);
    w.rec.queued_ms = began - w.rec.requested_ms;
    w.startup_ms = now - began;
    Metrics::Default().Observe("burst_worker_cold_start_seconds", {},
                               static_cast<double>(now - w.rec.requested_ms) / 1000.0);
    if (w.rec.seg_line && began > w.rec.seg_start_ms) w.rec.seg_start_ms = began;
    w.rec.state = WorkerState::kIdle;
    w.rec.started_ms = now;
    w.rec.since_ms = now;
    if (pid > 0) w.rec.pid = pid;
    w.idle_since_ms = now;
    meter_.Switch(w.rec, w.usage, now, UsageLine::kIdle, w.rec.seg_org, "");
    // The worker retries its registration; the segments stay in memory.
    if (Status s = SaveWorker(w); !s.ok()) return s;
  }
  while (DispatchOne(now)) {
  }
  return Json{{"worker", worker_id},
              {"lease_ttl_s", static_cast<double>(opt_.lease_ttl_ms) / 1000.0},
              {"heartbeat_s", static_cast<double>(opt_.lease_ttl_ms) / 3000.0},
              {"scaledown_window_s", static_cast<double>(opt_.scaledown_window_ms) / 1000.0},
              {"threads", opt_.threads_per_slot},
              {"store", opt_.store_url}};
}

void Runtime::DropHeld(const std::string& key) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!dropped_.insert(key).second) return;
  dropped_order_.push_back(key);
  if (dropped_order_.size() > kMaxDropped) {
    dropped_.erase(dropped_order_.front());
    dropped_order_.pop_front();
  }
}

Result<std::optional<Json>> Runtime::Lease(const std::string& worker_id, const std::string& loaded_model,
                                           int64_t wait_ms, const std::vector<std::string>& checkpoints,
                                           const std::vector<std::string>& held) {
  std::unique_lock<std::mutex> lock(mu_);
  const int64_t deadline = clock_.NowMs() + std::max<int64_t>(0, wait_ms);
  {
    auto it = workers_.find(worker_id);
    if (it == workers_.end()) return Status(Code::kNotFound, "no worker " + worker_id, "worker");
    if (it->second.rec.model != loaded_model) {
      it->second.rec.model = loaded_model;
      SaveWorker(it->second).IgnoreError(kKept);
    }
    it->second.ready = ReplicaReady(it->second, loaded_model, checkpoints);
    it->second.held = std::set<std::string>(held.begin(), held.end());
    Json drop = Json::array();
    for (auto h = it->second.held.begin(); h != it->second.held.end();) {
      if (dropped_.count(*h) == 0) {
        ++h;
        continue;
      }
      drop.push_back(*h);
      h = it->second.held.erase(h);
    }
    if (!drop.empty()) return std::optional<Json>(Json{{"action", "drop"}, {"loops", std::move(drop)}});
    Undrain(it->second, clock_.NowMs());
    while (DispatchOne(clock_.NowMs())) {
    }
  }
  for (;;) {
    auto it = workers_.find(worker_id);
    if (it == workers_.end() || stopping_ || it->second.rec.state == WorkerState::kStopping) {
      return std::optional<Json>(Json{{"action", "exit"}});
    }
    Worker& w = it->second;
    if (auto call = Undelivered(w)) {
      w.warmed = true;  // a replica's call loads the checkpoint itself
      return std::optional<Json>(Deliver(w, *call));
    }
    if (!w.rec.deployment.empty() && !w.warmed && w.calls.empty()) {
      // A new replica loads its checkpoint before the first call needs it.
      if (const LiveDeployment* d = deployments_.Find(w.rec.deployment); d != nullptr) {
        w.warmed = true;
        const Json& t = d->rec.target;
        return std::optional<Json>(Json{{"kind", ToString(TaskKind::kWarm)},
                                        {"deployment", d->rec.id},
                                        {"model", t.value("base_model", "")},
                                        {"model_store", t.value("base_model_store", "")},
                                        {"checkpoint_prefix", t.value("checkpoint_prefix", "")},
                                        {"full", t.value("full", false)}});
      }
    }
    if (!w.rec.job_id.empty()) {
      Task* t = jobs_.Find(w.rec.job_id);
      const int rank = t == nullptr ? -1 : t->RankOf(worker_id);
      if (rank >= 0 && t->attempt == w.rec.attempt && !t->DeliveredOf(rank)) {
        auto rec = md_.GetJobById(t->job_id);
        if (!rec.ok()) return rec.status();
        t->DeliveredOf(rank) = true;
        t->LeaseOf(rank) = clock_.NowMs() + opt_.lease_ttl_ms;
        return std::optional<Json>(TaskJson(rec.value(), *t, rank));
      }
    }
    if (!clock_.WaitUntil(cv_, lock, deadline)) {
      auto again = workers_.find(worker_id);
      // Loop again only for work assigned to this worker and not yet handed over.
      if (again != workers_.end()) {
        const Worker& w = again->second;
        Task* t = w.rec.job_id.empty() ? nullptr : jobs_.Find(w.rec.job_id);
        const int rank = t == nullptr ? -1 : t->RankOf(worker_id);
        if (Undelivered(w) || (rank >= 0 && !t->DeliveredOf(rank))) continue;
        // A replica stays while its deployment holds it, whatever its own
        // scaledown window says.
        if (!w.rec.deployment.empty()) return std::optional<Json>(Json{{"action", "hold"}});
      }
      return std::optional<Json>();
    }
  }
}

Json Runtime::Deliver(const Worker& w, WorkerCall& call) {
  call.delivered = true;
  Json task = call.task;
  task["kind"] = ToString(call.kind());
  task["id"] = call.id;
  task["org"] = call.org_id;
  task["model"] = call.base_model;
  task["stream"] = call.stream;
  if (call.loop && !call.loop->restore.is_null() && !w.held.count(call.loop->affinity))
    task["restore"] = call.loop->restore;
  return task;
}

Result<std::optional<Json>> Runtime::JoinSample(const std::string& worker_id) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = workers_.find(worker_id);
  if (it == workers_.end()) return Status(Code::kNotFound, "no worker " + worker_id, "worker");
  // Calls a batch can take only (BatchKey): anything else (a loop request
  // given to the worker once its batch emptied) waits for its next lease.
  for (const auto& call : it->second.calls) {
    if (!call->delivered && !BatchKey(*call).empty()) return std::optional<Json>(Deliver(it->second, *call));
  }
  return std::optional<Json>();
}

Result<std::string> Runtime::Heartbeat(const std::string& worker_id, const std::string& job_id,
                                       int64_t attempt, int64_t step) {
  std::lock_guard<std::mutex> lock(mu_);
  int rank = 0;
  auto t = RunningTask(worker_id, job_id, attempt, &rank);
  if (!t.ok()) return t.status();
  const int64_t now = clock_.NowMs();
  t.value()->LeaseOf(rank) = now + opt_.lease_ttl_ms;
  auto w = workers_.find(worker_id);
  if (w != workers_.end()) w->second.rec.heartbeat_ms = now;
  if (step > t.value()->step) {
    t.value()->step = step;
    auto rec = md_.GetJobById(job_id);
    if (rec.ok() && rec.value().status == JobStatus::kRunning && step > rec.value().step) {
      rec.value().step = step;
      // Progress only: the renewed lease is what matters here, and the next
      // heartbeat or metrics event writes the step again (logged once while
      // the writes keep failing).
      Status s = md_.UpdateJob(rec.value());
      if (!s.ok() && !t.value()->step_unsaved) {
        LogFailure("cannot write step " + std::to_string(step) + " of " + job_id +
                       " (tried again at each heartbeat)",
                   s);
      }
      t.value()->step_unsaved = !s.ok();
    }
  }
  return std::string(t.value()->cancel ? "cancel" : "continue");
}

Status Runtime::Events(const std::string& worker_id, const std::string& job_id, int64_t attempt,
                       std::vector<EventRecord> events, std::vector<std::string> logs) {
  std::lock_guard<std::mutex> lock(mu_);
  auto t = RunningTask(worker_id, job_id, attempt);
  if (!t.ok()) return t.status();
  int64_t step = 0, tokens = 0, total = 0;
  Json progress;  // a batch's: {request_counts, finalizing?}, the newest
  for (auto& e : events) {
    e.job_id = job_id;
    if (e.type == "metrics" && e.data.is_object()) {
      step = std::max<int64_t>(step, e.data.value("step", int64_t{0}));
      tokens = std::max<int64_t>(tokens, e.data.value("tokens", int64_t{0}));
      total = std::max<int64_t>(total, e.data.value("total_steps", int64_t{0}));
      if (e.data.value("request_counts", Json()).is_object()) progress = e.data;
    }
  }
  if (Status s = md_.AddEvents(events); !s.ok()) return s;
  std::vector<LogRecord> lines;
  for (auto& l : logs) lines.push_back(LogRecord{0, job_id, attempt, 0, std::move(l)});
  if (Status s = md_.AddLogs(lines); !s.ok()) return s;
  if (step > 0 || total > 0 || progress.is_object()) {
    auto rec = md_.GetJobById(job_id);
    if (!rec.ok()) return rec.status();
    JobRecord job = rec.value();
    if (progress.is_object()) {
      if (!job.result.is_object()) job.result = Json::object();
      job.result["request_counts"] = progress["request_counts"];
      if (progress.value("finalizing", false) && !job.result.contains("finalizing_at"))
        job.result["finalizing_at"] = clock_.NowMs() / 1000;
    }
    job.step = std::max(job.step, step);
    job.trained_tokens = std::max(job.trained_tokens, tokens);
    if (total > 0) job.total_steps = total;
    if (Status s = md_.UpdateJob(job); !s.ok()) return s;
    t.value()->step = std::max(t.value()->step, step);
  }
  return Status();
}

Status Runtime::Checkpoint(const std::string& worker_id, const std::string& job_id, int64_t attempt,
                           int64_t step, const Json& metrics, const BlasFacts& blas) {
  std::lock_guard<std::mutex> lock(mu_);
  int rank = 0;
  auto t = RunningTask(worker_id, job_id, attempt, &rank);
  if (!t.ok()) return t.status();
  if (rank != 0)
    return Status(Code::kInvalidArgument, "only rank 0 of a job's workers writes checkpoints", "step");
  auto rec = md_.GetJobById(job_id);
  if (!rec.ok()) return rec.status();
  JobRecord job = rec.value();
  CheckpointRecord c;
  c.job_id = job_id;
  c.step = step;
  c.metrics = metrics.is_object() ? metrics : Json::object();
  c.prefix = CheckpointPrefix(JobPrefix(job.org_id, job_id), step);
  if (Status s = md_.AddCheckpoint(c); !s.ok()) return s;
  if (step > job.resume_step) {
    job.resume_step = step;
    if (Status s = md_.UpdateJob(job); !s.ok()) return s;
    t.value()->blas = blas;
  }
  AddEvent(md_, job_id, "Checkpoint " + CheckpointModelName(job_id, step, SuffixOf(job.spec)) + " saved");
  return Status();
}

Status Runtime::Finish(const std::string& worker_id, const std::string& job_id, int64_t attempt,
                       const std::string& outcome_name, const Json& error, bool retryable, int64_t step,
                       int64_t trained_tokens, const Json& result) {
  std::lock_guard<std::mutex> lock(mu_);
  // A worker reports one of four outcomes; lost and timeout are the control
  // plane's to decide.
  auto parsed = FromString<AttemptOutcome>(outcome_name);
  if (!parsed.ok() || parsed.value() == AttemptOutcome::kLost || parsed.value() == AttemptOutcome::kTimeout) {
    return Status(Code::kInvalidArgument, "unknown outcome \"" + outcome_name + "\"", "outcome");
  }
  const AttemptOutcome outcome = parsed.value();
  const int64_t now = clock_.NowMs();
  int rank = 0;
  auto tr = RunningTask(worker_id, job_id, attempt, &rank);
  if (!tr.ok()) {
    // A gang's member reporting the end of an attempt another member ended:
    // it is free now.
    auto w = workers_.find(worker_id);
    if (w == workers_.end() || !w->second.member || w->second.rec.job_id != job_id ||
        w->second.rec.attempt != attempt) {
      return tr.status();
    }
    Undrain(w->second, now);
    while (DispatchOne(now)) {
    }
    return Status();
  }
  Task& t = *tr.value();
  if (rank > 0 && outcome != AttemptOutcome::kFailed) {
    // A member's end: the attempt ends with rank 0's report (its checkpoint
    // and result), or with a member's failure.
    t.gang.member(rank).finished = true;
    auto w = workers_.find(worker_id);
    if (w != workers_.end()) {
      w->second.member = false;
      if (outcome == AttemptOutcome::kPreempted) {  // on its way out, as rank 0's below
        w->second.rec.state = WorkerState::kStopping;
        w->second.rec.job_id.clear();
        w->second.rec.since_ms = now;
        w->second.rec.exit_reason = "preempted";
        meter_.Switch(w->second.rec, w->second.usage, now, UsageLine::kIdle, t.org_id, "");
        SaveWorker(w->second).IgnoreError(kKept);
      } else {
        BackToIdle(w->second, now, t.org_id);
        SaveWorker(w->second).IgnoreError(kKept);
      }
    }
    while (DispatchOne(now)) {
    }
    return Status();
  }
  const std::string org = t.org_id;
  // Serverless scope bills the tokens of a completed or cancelled task (the
  // run's cumulative count, so a resumed run's tokens count once).
  const UsageLine line = t.line;
  const BillingScope scope = t.scope;
  const std::string run = t.run;
  int64_t tokens = 0;
  double token_cost = 0;
  // A timed-out job is failed (not billed) however the worker ended it.
  const bool billable =
      !t.end_as ? outcome == AttemptOutcome::kCompleted : t.end_as == AttemptOutcome::kCancelled;
  if (scope == BillingScope::kServerless && billable) {
    if (line == UsageLine::kEvaluation) {
      tokens = result.is_object() ? result.value("metrics", Json::object()).value("tokens", int64_t{0}) : 0;
      token_cost = static_cast<double>(tokens) / 1e6 * opt_.price_prefill_per_mtok;
    } else if (line == UsageLine::kBatch) {
      // The answered lines' prompt and sampled tokens, at the batch prices;
      // a batch cancelled meanwhile delivers no files, and costs nothing.
      const Json u = result.is_object() && !t.end_as ? result.value("usage", Json::object()) : Json::object();
      const int64_t in = u.value("input_tokens", int64_t{0}), out = u.value("output_tokens", int64_t{0});
      tokens = in + out;
      token_cost = static_cast<double>(in) / 1e6 * opt_.price_batch_prefill_per_mtok +
                   static_cast<double>(out) / 1e6 * opt_.price_batch_sample_per_mtok;
    } else {
      tokens = trained_tokens;
      token_cost = static_cast<double>(tokens) / 1e6 * opt_.price_train_per_mtok;
    }
  }
  // The worker's usage lines (its tokens, its segment) are saved before the
  // job reads as ended, so whoever sees it ended sees its cost too.
  bool settled = false;
  auto settle = [&] {
    settled = true;
    auto w = workers_.find(worker_id);
    if (w != workers_.end() && tokens > 0) {
      Meter::Charge(w->second.usage, now, line, org, job_id, run, tokens, token_cost);
      SaveWorker(w->second).IgnoreError(kKept);  // whatever state the worker is in
    }
    if (w != workers_.end() && outcome == AttemptOutcome::kPreempted) {
      // A preempted worker is on its way out: it takes no more tasks.
      w->second.rec.state = WorkerState::kStopping;
      w->second.rec.job_id.clear();
      w->second.rec.since_ms = now;
      w->second.rec.exit_reason = "preempted";
      meter_.Switch(w->second.rec, w->second.usage, now, UsageLine::kIdle, org, "");
      SaveWorker(w->second).IgnoreError(kKept);
    } else if (w != workers_.end() && w->second.rec.state == WorkerState::kBusy) {
      w->second.rec.state = WorkerState::kIdle;
      w->second.rec.job_id.clear();
      w->second.rec.since_ms = now;
      w->second.idle_since_ms = now;
      meter_.Switch(w->second.rec, w->second.usage, now, UsageLine::kIdle, org, "");
      SaveWorker(w->second).IgnoreError(kKept);
    }
  };
  // Each branch ends the attempt first; a failure before that changes
  // nothing and the worker sends its finish again.
  Status s;
  if (t.end_as) {
    s = EndAttempt(t, now, *t.end_as, error, false, false);
  } else if (outcome == AttemptOutcome::kCompleted) {
    s = EndAttempt(t, now, AttemptOutcome::kCompleted, Json(), false, false);
    if (s.ok()) {
      settle();
      auto rec = md_.GetJobById(job_id);
      if (!rec.ok()) return rec.status();
      JobRecord job = rec.value();
      job.step = step;
      job.trained_tokens = trained_tokens;
      if (job.kind() == TaskKind::kBatch) {
        s = FinishBatch(job, attempt, result, now);
      } else {
        job.fine_tuned_model = CheckpointModelName(job_id, step, SuffixOf(job.spec));
        job.result = result;
        s = FinishJob(job, JobStatus::kSucceeded, Json(), now);
      }
    }
  } else if (outcome == AttemptOutcome::kPreempted || outcome == AttemptOutcome::kCancelled) {
    // Stopped without a cancel from here (a signal to the worker): requeued.
    s = EndAttempt(t, now, AttemptOutcome::kPreempted, error, true, false);
  } else if (retryable) {
    s = EndAttempt(t, now, AttemptOutcome::kFailed, error, true, true);
  } else {
    s = EndAttempt(t, now, AttemptOutcome::kFailed, error, false, false);
    if (s.ok()) {
      settle();
      auto rec = md_.GetJobById(job_id);
      if (!rec.ok()) return rec.status();
      JobRecord job = rec.value();
      s = FinishJob(job, JobStatus::kFailed,
                    error.is_object() ? error : ErrorJson("internal", "worker reported a failure"), now);
    }
  }
  if (!s.ok()) return s;
  if (!settled) settle();
  while (DispatchOne(now)) {
  }
  return Status();
}

Status Runtime::WorkerExiting(const std::string& worker_id, const std::string& reason) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = workers_.find(worker_id);
  if (it == workers_.end()) return Status(Code::kNotFound, "no worker " + worker_id, "worker");
  Worker& w = it->second;
  const int64_t now = clock_.NowMs();
  // Work assigned while the worker was deciding to leave, and not yet
  // delivered, goes back to the queue at no cost.
  std::vector<std::shared_ptr<WorkerCall>> back;
  for (auto call = Undelivered(w); call; call = Undelivered(w)) {
    w.calls.erase(std::find(w.calls.begin(), w.calls.end(), call));
    back.push_back(call);
  }
  for (auto pos = back.rbegin(); pos != back.rend(); ++pos) {  // ahead of the queue, in their order
    const std::shared_ptr<WorkerCall>& call = *pos;
    call->worker.clear();
    if (call->deployment.empty()) {
      samples_.PushFront(call);
    } else if (LiveDeployment* d = deployments_.Find(call->deployment); d != nullptr) {
      d->waiting.push_front(call);  // its deployment's replicas only
    } else {
      call->Finish();
      call->error = Status(Code::kNotFound, "deployment " + call->deployment + " was deleted", "model");
    }
    cv_.notify_all();
  }
  if (!w.rec.job_id.empty()) {
    Task* t = jobs_.Find(w.rec.job_id);
    const int rank = t == nullptr ? -1 : t->RankOf(worker_id);
    if (rank >= 0 && t->attempt == w.rec.attempt && jobs_.IsRunning(w.rec.job_id) && !t->DeliveredOf(rank)) {
      // On failure the task stays assigned to this worker, and its exit
      // (ObserveExit) ends the attempt instead.
      if (Status s = EndAttempt(*t, now, AttemptOutcome::kLost,
                                ErrorJson("worker_left", "worker " + worker_id + " left before taking it"),
                                !t->end_as, false);
          !s.ok()) {
        LogFailure("cannot requeue " + w.rec.job_id + " from the leaving worker " + worker_id, s);
      }
    }
    w.rec.job_id.clear();
  }
  if (w.rec.state == WorkerState::kBusy)
    meter_.Switch(w.rec, w.usage, now, UsageLine::kIdle, w.rec.last_org, "");
  w.rec.state = WorkerState::kStopping;
  w.rec.exit_reason = reason;
  w.rec.since_ms = now;
  Status s = SaveWorker(w);
  while (DispatchOne(now)) {
  }
  return s;
}

void Runtime::ObserveExit(const WorkerExit& e) {
  auto it = workers_.find(e.worker_id);
  if (it == workers_.end()) return;
  Worker& w = it->second;
  const int64_t at = std::max(e.at_ms, w.rec.seg_start_ms);
  EndSample(w, at);
  if (!w.rec.job_id.empty()) {
    Task* t = jobs_.Find(w.rec.job_id);
    const int rank = t == nullptr ? -1 : t->RankOf(w.rec.id);
    if (rank >= 0 && t->attempt == w.rec.attempt && jobs_.IsRunning(w.rec.job_id) && t->OnAttempt(rank)) {
      const AttemptOutcome outcome = t->end_as.value_or(AttemptOutcome::kLost);
      // On failure the task still names this worker, and the tick finds
      // its worker gone and ends the attempt again.
      if (Status s = EndAttempt(*t, at, outcome,
                                ErrorJson("worker_lost", "worker " + w.rec.id + " exited (" + e.how + ")"),
                                !t->end_as, /*costs_retry=*/t->DeliveredOf(rank));
          !s.ok()) {
        LogFailure("cannot end the attempt of " + w.rec.job_id + " on the exited worker " + w.rec.id, s);
      }
    }
  }
  if (w.rec.state == WorkerState::kStarting) {
    const int64_t next = workers_.StartFailed(at);
    std::fprintf(stderr, "burst serve: worker %s exited before registering (%s); next start in %lld ms\n",
                 w.rec.id.c_str(), e.how.c_str(), static_cast<long long>(next - at));
  }
  meter_.Switch(w.rec, w.usage, at, std::nullopt, "", "");
  w.rec.state = WorkerState::kExited;
  w.rec.exited_ms = at;
  w.rec.job_id.clear();
  if (w.rec.exit_reason.empty())
    w.rec.exit_reason = e.how;
  else
    w.rec.exit_reason += " (" + e.how + ")";
  SaveWorker(w).IgnoreError("an unwritten exit is kept by RemoveWorker and written again");
  RemoveWorker(it);
  cv_.notify_all();
}

}  // namespace burst
