// The runtime's frame: construction, the tick (leases, timeouts, cancels
// not obeyed, idle workers and replicas past their window, exits the
// executor observed, records whose write failed), the ticker thread,
// shutdown, and inspection (/v1/workers, counts for tests and the
// benchmark). The rest of Runtime is in the other runtime_*.cpp files
// (runtime/README.md).
#include "runtime/runtime.h"

#include <chrono>
#include <cstdio>

#include "runtime/runtime_internal.h"

namespace burst {
using namespace runtime_internal;

namespace {
// How long a task or sampling call told to stop may run on before its
// worker is stopped.
constexpr int64_t kCancelGraceMs = 20'000;
}  // namespace

Runtime::Runtime(Metadata& md, Executor& executor, Clock& clock, RuntimeOptions options)
    : md_(md),
      exec_(executor),
      clock_(clock),
      opt_(std::move(options)),
      workers_(opt_.slots, opt_.gpus),
      meter_(md, opt_.price_per_slot_second, opt_.price_per_gpu_second) {}

Runtime::~Runtime() { Shutdown(false, 0); }

// ----------------------------------------------------------------------------
// ticking

void Runtime::Tick() {
  std::lock_guard<std::mutex> lock(mu_);
  TickLocked();
}

void Runtime::TickLocked() {
  const int64_t now = clock_.NowMs();
  RetryUnsaved();
  for (const WorkerExit& e : exec_.Poll()) ObserveExit(e);
  for (const std::string& id : jobs_.RunningIds()) {
    Task* found = jobs_.Find(id);
    if (found == nullptr || found->worker.empty()) continue;
    Task& t = *found;
    auto w = workers_.find(t.worker);
    if (w == workers_.end()) {
      const std::string wid = t.worker;
      if (Status s = EndAttempt(t, now, t.end_as.value_or(AttemptOutcome::kLost),
                                ErrorJson("worker_lost", "worker " + wid + " is gone"), !t.end_as, true);
          !s.ok()) {
        LogFailure(
            "cannot end the attempt of " + id + " on the gone worker " + wid + " (tried again next tick)", s);
      }
      continue;
    }
    if (now > t.lease_until_ms) {
      // No heartbeat within the lease TTL: the task goes elsewhere, and the
      // worker (hung or cut off) is stopped so it cannot write any more.
      const std::string wid = t.worker;
      Metrics::Default().Add("burst_lease_expiries_total");
      if (Status s =
              EndAttempt(t, now, t.end_as.value_or(AttemptOutcome::kLost),
                         ErrorJson("lease_expired", "no heartbeat from worker " + wid + " for " +
                                                        std::to_string(opt_.lease_ttl_ms / 1000) + " s"),
                         !t.end_as, true);
          !s.ok()) {
        LogFailure("cannot end the lapsed attempt of " + id + " (tried again next tick)", s);
      }
      if (w->second.rec.state != WorkerState::kStopping) {
        w->second.rec.state = WorkerState::kStopping;
        w->second.rec.job_id.clear();
        w->second.rec.exit_reason = "lease expired";
        SaveWorker(w->second).IgnoreError(kKept);
        exec_.Stop(wid, 5000);
      }
      continue;
    }
    if (!t.end_as && t.timeout_ms > 0 && t.run_ms_before + (now - t.attempt_start_ms) > t.timeout_ms) {
      auto rec = md_.GetJobById(id);
      Status s = rec.status();
      if (rec.ok()) {
        JobRecord job = rec.value();
        s = FinishJob(job, JobStatus::kFailed,
                      ErrorJson("timeout",
                                "the job ran longer than its timeout_s of " +
                                    std::to_string(t.timeout_ms / 1000) + " s",
                                "timeout_s"),
                      now);
      }
      if (!s.ok()) {
        // Not stopped yet: the job must read failed before its task ends.
        LogFailure("cannot fail the timed-out job " + id + " (tried again next tick)", s);
        continue;
      }
      t.end_as = AttemptOutcome::kTimeout;
      t.cancel = true;
      t.cancel_at_ms = now;
    }
    if (t.cancel && now - t.cancel_at_ms > kCancelGraceMs && w->second.rec.state != WorkerState::kStopping) {
      // The worker did not stop the task: stop the worker.
      w->second.rec.state = WorkerState::kStopping;
      w->second.rec.exit_reason = "did not stop a cancelled task";
      SaveWorker(w->second).IgnoreError(kKept);
      exec_.Stop(t.worker, 5000);
      for (const GangMember& m : t.gang.members()) {  // and the rest of its gang
        auto mw = workers_.find(m.worker);
        if (mw != workers_.end() && !m.finished && mw->second.rec.state != WorkerState::kStopping) {
          StopWorker(mw->second, "did not stop a cancelled task", 5000);
        }
      }
    }
  }
  TickGangs(now);
  for (auto& [id, w] : workers_) {
    for (const auto& call : w.calls) {
      const bool over = w.rec.state == WorkerState::kBusy && now - call->started_ms > 300'000;
      const bool unstopped = call->cancelled && now - call->cancel_at_ms > kCancelGraceMs;
      if (w.rec.state == WorkerState::kStopping || !(over || unstopped)) continue;
      w.rec.state = WorkerState::kStopping;
      w.rec.exit_reason = over ? "a sampling call ran over 300 s" : "did not stop a cancelled sampling call";
      SaveWorker(w).IgnoreError(kKept);
      exec_.Stop(id, 5000);
    }
    const bool stuck_starting = w.rec.state == WorkerState::kStarting && now - w.rec.requested_ms > 300'000;
    // Replicas go by their deployment's window (below), not the pool's.
    const bool idle_too_long = w.rec.deployment.empty() && w.rec.state == WorkerState::kIdle &&
                               now - w.idle_since_ms > opt_.scaledown_window_ms + 10'000;
    if (idle_too_long || stuck_starting) {
      w.rec.state = WorkerState::kStopping;
      w.rec.exit_reason = idle_too_long ? "idle past the scaledown window" : "did not register within 300 s";
      SaveWorker(w).IgnoreError(kKept);
      exec_.Stop(id, 5000);
    }
  }
  // Replicas idle past their deployment's window go, down to min_replicas;
  // replicas of a deployment that is gone go at once.
  for (auto& [id, w] : workers_) {
    if (w.rec.deployment.empty() || w.rec.state == WorkerState::kStopping) continue;
    const LiveDeployment* d = deployments_.Find(w.rec.deployment);
    if (d == nullptr) {
      StopWorker(w, "deployment deleted", 5000);
      continue;
    }
    if (w.rec.state == WorkerState::kIdle && w.calls.empty() && d->waiting.empty() &&
        now - w.idle_since_ms > d->window_ms && LiveReplicas(d->rec.id) > d->min_replicas) {
      StopWorker(w, "deployment " + d->rec.name + " scaled down (idle past its window)", 5000);
    }
  }
  while (DispatchOne(now)) {
  }
}

void Runtime::StartTicker(int64_t period_ms) {
  ticker_ = std::thread([this, period_ms] {
    std::unique_lock<std::mutex> lock(mu_);
    while (!stopping_) {
      TickLocked();
      const int64_t next = clock_.NowMs() + period_ms;
      while (!stopping_ && clock_.WaitUntil(cv_, lock, next)) {
      }
    }
  });
}

void Runtime::Shutdown(bool stop_workers, int64_t wait_ms) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stop_workers) {
      for (auto& [id, w] : workers_) exec_.Stop(id, opt_.stop_grace_ms);
    }
    stopping_ = true;
    // Calls still waiting for a worker will not get one: their callers
    // (request threads, training loop runs) hear it now, not at their deadline.
    auto drop = [](std::deque<std::shared_ptr<WorkerCall>>& q) {
      for (auto& c : q) {
        c->Finish();
        c->error = Status(Code::kUnavailable, "the control plane is shutting down; retry", "");
      }
      q.clear();
    };
    std::deque<std::shared_ptr<WorkerCall>> waiting = samples_.TakeAll();
    drop(waiting);
    for (auto& [id, d] : deployments_) drop(d.waiting);
    cv_.notify_all();
  }
  if (ticker_.joinable()) ticker_.join();
  if (stop_workers) {
    // Waits for the workers' processes to leave (they report preemptions
    // meanwhile): real processes, so real time.
    auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(wait_ms);
    while (std::chrono::steady_clock::now() < deadline) {
      {
        std::lock_guard<std::mutex> lock(mu_);
        for (const WorkerExit& e : exec_.Poll()) ObserveExit(e);
        if (workers_.empty()) break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  }
  std::lock_guard<std::mutex> lock(mu_);
  RetryUnsaved();
  const Meter::Behind exited = meter_.ExitedBehind();
  size_t segments = exited.segments, records = exited.records;
  for (const auto& [id, w] : workers_) {
    records += w.usage.save_failures > 0;
    if (w.usage.save_failures > 0) segments += w.usage.closed.size();
  }
  if (records > 0) {
    // Their records in the database still show the segments open; the next
    // start's Recover closes them at its own time, billing the time as one.
    std::fprintf(stderr,
                 "burst serve: %zu worker records and %zu closed usage segments could not be written before "
                 "shutdown; the next start bills their open time from the records it finds\n",
                 records, segments);
  }
}

// ----------------------------------------------------------------------------
// inspection

std::string Runtime::WorkOrg(const Worker& w) const {
  if (!w.rec.deployment.empty()) {
    const LiveDeployment* d = deployments_.Find(w.rec.deployment);
    return d != nullptr ? d->rec.org_id : w.rec.last_org;
  }
  if (!w.calls.empty()) return w.calls.front()->org_id;
  if (!w.rec.job_id.empty()) {
    const Task* t = jobs_.Find(w.rec.job_id);
    return t != nullptr ? t->org_id : w.rec.last_org;
  }
  // A worker starting was started for someone's work.
  return w.rec.state == WorkerState::kStarting ? w.rec.last_org : "";
}

std::string Runtime::WorkModelName(const Worker& w) const {
  if (!w.calls.empty()) return w.calls.front()->model_name;
  if (!w.rec.job_id.empty()) {
    const Task* t = jobs_.Find(w.rec.job_id);
    if (t != nullptr) return t->model_name;
  }
  if (!w.rec.deployment.empty()) {
    const LiveDeployment* d = deployments_.Find(w.rec.deployment);
    if (d != nullptr) return d->rec.target.value("checkpoint", d->rec.name);
  }
  return "";
}

namespace {
// A worker's BLAS as /v1/workers shows it (the pool's, not its work's).
Json BlasJson(const BlasFacts& b) {
  return b.known() ? Json{{"library", b.library}, {"kernels", b.kernels}} : Json();
}
// The pool's GPUs: [{"index", "type", "name"}].
Json GpusJson(const std::vector<GpuSlot>& gpus) {
  Json out = Json::array();
  for (const GpuSlot& g : gpus) out.push_back({{"index", g.index}, {"type", g.type}, {"name", g.name}});
  return out;
}
}  // namespace

Json Runtime::WorkerJson(const Worker& w) const {
  return {{"id", w.rec.id},
          {"object", "worker"},
          {"state", ToString(w.rec.state)},
          {"slot", w.rec.slot},
          {"device", w.rec.device},
          {"gpus", w.rec.gpus},
          {"pid", w.rec.pid},
          {"model", w.rec.model.empty() ? Json() : Json(w.rec.model)},
          {"job", w.rec.job_id.empty() ? Json() : Json(w.rec.job_id)},
          {"sampling", w.calls.empty() ? Json() : Json(w.calls.front()->id)},
          {"sampling_calls", w.calls.size()},
          {"deployment", w.rec.deployment.empty() ? Json() : Json(w.rec.deployment)},
          {"since", w.rec.since_ms / 1000},
          {"requested_at", w.rec.requested_ms / 1000},
          {"started_at", w.rec.started_ms ? Json(w.rec.started_ms / 1000) : Json()},
          {"requested_ms", w.rec.requested_ms},
          {"started_ms", w.rec.started_ms ? Json(w.rec.started_ms) : Json()},
          {"queued_ms", w.rec.started_ms ? Json(w.rec.queued_ms) : Json()},
          {"blas", BlasJson(w.blas)}};
}

Json Runtime::WorkersJson(const std::string& org_id) {
  std::lock_guard<std::mutex> lock(mu_);
  Json data = Json::array();
  for (const auto& [id, w] : workers_) {
    const std::string owner = WorkOrg(w);
    if (!owner.empty() && owner != org_id) {
      // The pool is shared, its work is not: which organisation, job, call,
      // model or process is none of the caller's business, nor when that
      // work began. The worker's own life (when it was asked for and
      // started) is the pool's.
      data.push_back({{"id", w.rec.id},
                      {"object", "worker"},
                      {"state", ToString(WorkerState::kBusy)},
                      {"slot", w.rec.slot},
                      {"device", w.rec.device},
                      {"gpus", w.rec.gpus},
                      {"pid", Json()},
                      {"model", Json()},
                      {"job", Json()},
                      {"sampling", Json()},
                      {"deployment", Json()},
                      {"since", Json()},
                      {"requested_at", w.rec.requested_ms / 1000},
                      {"started_at", w.rec.started_ms ? Json(w.rec.started_ms / 1000) : Json()},
                      {"requested_ms", w.rec.requested_ms},
                      {"started_ms", w.rec.started_ms ? Json(w.rec.started_ms) : Json()},
                      {"queued_ms", w.rec.started_ms ? Json(w.rec.queued_ms) : Json()},
                      {"blas", BlasJson(w.blas)}});
      continue;
    }
    Json j = WorkerJson(w);
    // The caller's model by the name it used; a worker idle in the pool
    // shows none (its loaded folder is the server's business).
    const std::string name = owner.empty() ? "" : WorkModelName(w);
    j["model"] = name.empty() ? Json() : Json(name);
    data.push_back(std::move(j));
  }
  const size_t queued = jobs_.QueuedCount();
  return {{"object", "list"},
          {"data", data},
          {"slots", opt_.slots},
          {"threads_per_slot", opt_.threads_per_slot},
          {"slot_type", opt_.slot_type},
          {"gpus", GpusJson(opt_.gpus)},
          {"queued", queued}};
}

size_t Runtime::QueuedCount() {
  std::lock_guard<std::mutex> lock(mu_);
  return jobs_.QueuedCount();
}

size_t Runtime::LiveWorkerCount() {
  std::lock_guard<std::mutex> lock(mu_);
  return workers_.size();
}

Runtime::Gauges Runtime::ReadGauges() {
  std::lock_guard<std::mutex> lock(mu_);
  Gauges g;
  g.queued_by_org = jobs_.QueuedByOrg();
  for (const auto& [id, t] : jobs_.tasks()) {
    if (!t.worker.empty()) ++g.running_by_org[t.org_id];
  }
  for (const auto& [id, w] : workers_)
    ++g.workers_by_state_device[{std::string(ToString(w.rec.state)), w.rec.device}];
  for (const auto& [type, n] : CountByType(opt_.gpus)) {
    const WorkerPool::GpuUse use = workers_.Use(type);
    g.gpus_by_type_state[{type, "held"}] = use.held;
    g.gpus_by_type_state[{type, "free"}] = use.total - use.held;
  }
  return g;
}

int64_t Runtime::last_dispatch_ns() {
  std::lock_guard<std::mutex> lock(mu_);
  return last_dispatch_ns_;
}

}  // namespace burst
