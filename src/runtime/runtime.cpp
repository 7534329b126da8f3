#include "runtime/runtime.h"

#include <algorithm>
#include <chrono>
#include <cstdio>

#include "core/fs.h"
#include "core/ids.h"

namespace burst {
namespace {

Json ErrorJson(const std::string& code, const std::string& message, const std::string& param = "") {
  return {{"code", code}, {"message", message}, {"param", param.empty() ? Json() : Json(param)}};
}

std::string StepName(int64_t step) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "step-%08lld", static_cast<long long>(step));
  return buf;
}

bool Terminal(const std::string& status) {
  return status == "succeeded" || status == "failed" || status == "cancelled";
}

int64_t SteadyNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace

Runtime::Runtime(Metadata& md, Executor& executor, Clock& clock, RuntimeOptions options)
    : md_(md), exec_(executor), clock_(clock), opt_(std::move(options)) {}

Runtime::~Runtime() { Shutdown(false, 0); }

// ----------------------------------------------------------------------------
// small helpers

std::string RunOfCheckpointPrefix(const std::string& prefix) {
  const std::string mark = "/jobs/";
  const size_t at = prefix.find(mark);
  if (at == std::string::npos) return "";
  const size_t end = prefix.find('/', at + mark.size());
  return prefix.substr(at + mark.size(), end == std::string::npos ? std::string::npos : end - at - mark.size());
}

namespace {
// A task's usage line, billing scope and run, from its job.
template <typename Task>
void SetTaskBilling(Task& t, const JobRecord& j) {
  const bool eval = j.spec.value("kind", "") == "eval";
  t.line = eval ? "evaluation" : "training";
  t.scope = j.spec.value("scope", "dedicated");
  t.run = eval ? RunOfCheckpointPrefix(j.spec.value("checkpoint_prefix", "")) : j.id;
}
void AddEvent(Metadata& md, const std::string& job_id, const std::string& message, const std::string& level = "info",
              const Json& data = Json()) {
  EventRecord e;
  e.job_id = job_id;
  e.level = level;
  e.type = "message";
  e.message = message;
  e.data = data;
  md.AddEvents({e});
}
}  // namespace

Status Runtime::SaveWorker(Worker& w) {
  Status s = md_.PutWorker(w.rec, w.closed);
  if (s.ok()) w.closed.clear();
  return s;
}

Status Runtime::SwitchSegment(Worker& w, int64_t at_ms, const std::string& line, const std::string& org,
                              const std::string& job, const std::string& scope, const std::string& run) {
  WorkerRecord& r = w.rec;
  // A replica's whole life is its deployment's: it is never idle on its own.
  if (line == "idle" && !r.deployment.empty()) return Status();
  if (!r.seg_line.empty() && at_ms > r.seg_start_ms) {
    // Serverless work's worker time is recorded, and billed as tokens instead.
    const double cost = r.seg_scope == "serverless"
                            ? 0.0
                            : static_cast<double>(at_ms - r.seg_start_ms) / 1000.0 * opt_.price_per_slot_second;
    UsageRecord u{r.id, r.seg_org, r.seg_job, r.seg_line, r.seg_start_ms, at_ms, cost, r.seg_scope, 0, r.seg_run};
    w.closed.push_back(u);
  }
  const bool work = !line.empty() && line != "idle";
  if (work && !scope.empty()) r.last_scope = scope;
  if (work) r.last_run = run;
  r.seg_line = line;
  r.seg_org = org;
  r.seg_job = job;
  r.seg_scope = scope.empty() ? r.last_scope : scope;
  // Idle time belongs to the run the worker served last.
  r.seg_run = line == "idle" && run.empty() ? r.last_run : run;
  r.seg_start_ms = at_ms;
  return Status();
}

void Runtime::ChargeTokens(Worker& w, int64_t at_ms, const std::string& line, const std::string& org,
                           const std::string& job, const std::string& run, int64_t tokens, double cost) {
  if (tokens <= 0) return;
  w.closed.push_back(UsageRecord{"", org, job, line, at_ms, at_ms, cost, "serverless", tokens, run});
}

void Runtime::Enqueue(Task t) {
  t.worker.clear();
  t.delivered = false;
  t.cancel = false;
  queue_[t.org_id].push_back(t.job_id);
  tasks_[t.job_id] = std::move(t);
}

void Runtime::RemoveFromQueue(const std::string& org, const std::string& job_id) {
  auto it = queue_.find(org);
  if (it == queue_.end()) return;
  auto& dq = it->second;
  auto pos = std::find(dq.begin(), dq.end(), job_id);
  if (pos != dq.end()) dq.erase(pos);
  if (dq.empty()) queue_.erase(it);
}

Result<Runtime::Task*> Runtime::RunningTask(const std::string& worker_id, const std::string& job_id,
                                            int64_t attempt) {
  auto it = tasks_.find(job_id);
  if (it == tasks_.end() || it->second.worker != worker_id || it->second.attempt != attempt) {
    return Status(Code::kFailedPrecondition,
                  "attempt " + std::to_string(attempt) + " of " + job_id + " is no longer leased to " + worker_id,
                  "lease_lost");
  }
  return &it->second;
}

// ----------------------------------------------------------------------------
// jobs

Result<JobRecord> Runtime::Submit(JobRecord job, bool* created) {
  std::lock_guard<std::mutex> lock(mu_);
  *created = false;
  if (opt_.max_active_jobs_per_org > 0) {
    auto queued = queue_.find(job.org_id);
    const int active = running_[job.org_id] + (queued == queue_.end() ? 0 : static_cast<int>(queued->second.size()));
    if (active >= opt_.max_active_jobs_per_org) {
      // A replay of an accepted request is not a new job.
      if (!job.idempotency_key.empty()) {
        auto prev = md_.IdempotentReplay(job.org_id, job.idempotency_key, job.request_sha256);
        if (!prev.ok()) return prev.status();
        if (prev.value()) return *prev.value();
      }
      return Status(Code::kResourceExhausted,
                    "your organisation has " + std::to_string(active) + " jobs queued or running, its limit (" +
                        std::to_string(opt_.max_active_jobs_per_org) + "); wait for one to end",
                    "org_cap:max_active_jobs");
    }
  }
  job.status = "queued";
  std::vector<EventRecord> first(2);
  const bool eval = job.spec.value("kind", "") == "eval";
  first[0].message = (eval ? "Created evaluation " : "Created fine-tuning job ") + job.id;
  first[1].message = eval ? "Validated eval file " + job.spec.value("eval_file", "")
                          : "Validated training file " + job.spec.value("training_file", "");
  auto rec = md_.CreateJob(std::move(job), created, first);
  if (!rec.ok() || !*created) return rec;
  const JobRecord& j = rec.value();
  Task t;
  t.job_id = j.id;
  t.org_id = j.org_id;
  t.model = j.spec.value("base_model", j.spec.value("model", ""));
  SetTaskBilling(t, j);
  t.seq = next_seq_++;
  t.timeout_ms = static_cast<int64_t>(j.spec.value("timeout_s", 0.0) * 1000);
  Enqueue(std::move(t));
  const int64_t now = clock_.NowMs();
  while (DispatchOne(now)) {
  }
  return rec;
}

Result<JobRecord> Runtime::Cancel(const std::string& org_id, const std::string& job_id) {
  std::lock_guard<std::mutex> lock(mu_);
  auto rec = md_.GetJob(org_id, job_id);
  if (!rec.ok()) return rec;
  JobRecord job = rec.value();
  if (Terminal(job.status)) {
    return Status(Code::kFailedPrecondition, "job " + job_id + " has already " + job.status, "job_id");
  }
  const int64_t now = clock_.NowMs();
  auto it = tasks_.find(job_id);
  if (Status s = FinishJob(job, "cancelled", Json(), now); !s.ok()) return s;
  if (it != tasks_.end()) {
    Task& t = it->second;
    if (t.worker.empty()) {
      RemoveFromQueue(t.org_id, job_id);
      tasks_.erase(it);
    } else if (!t.delivered) {
      // Assigned but not yet picked up: take it back at once.
      auto w = workers_.find(t.worker);
      EndAttempt(t, now, "cancelled", Json(), false, false);
      if (w != workers_.end()) {
        w->second.rec.state = "idle";
        w->second.rec.job_id.clear();
        w->second.idle_since_ms = now;
        SwitchSegment(w->second, now, "idle", w->second.rec.last_org, "");
        SaveWorker(w->second);
      }
    } else {
      t.cancel = true;
      t.end_as = "cancelled";
      t.cancel_at_ms = now;
    }
  }
  return job;
}

Status Runtime::FinishJob(JobRecord& job, const std::string& status, const Json& error, int64_t now) {
  job.status = status;
  job.error = error;
  job.finished_at = now / 1000;
  if (Status s = md_.UpdateJob(job); !s.ok()) return s;
  std::string msg = status == "succeeded"   ? "The job has successfully completed"
                    : status == "cancelled" ? "The job was cancelled"
                                            : "The job failed: " + error.value("message", std::string("unknown error"));
  AddEvent(md_, job.id, msg, status == "failed" ? "error" : "info");
  return Status();
}

Status Runtime::EndAttempt(Task& t, int64_t now, const std::string& outcome, const Json& error, bool retry,
                           bool costs_retry) {
  const std::string job_id = t.job_id;
  if (Status s = md_.EndAttempt(job_id, t.attempt, now, outcome, error); !s.ok()) return s;
  if (running_[t.org_id] > 0) --running_[t.org_id];
  running_ids_.erase(job_id);
  auto rec = md_.GetJobById(job_id);
  if (!rec.ok()) return rec.status();
  JobRecord job = rec.value();
  job.run_seconds += static_cast<double>(now - t.attempt_start_ms) / 1000.0;
  t.run_ms_before += now - t.attempt_start_ms;
  if (!retry || Terminal(job.status)) {
    if (Status s = md_.UpdateJob(job); !s.ok()) return s;
    tasks_.erase(job_id);
    return Status();
  }
  const int64_t max_retries = job.spec.value("max_retries", int64_t{3});
  if (costs_retry && ++job.retries > max_retries) {
    const int64_t attempt = t.attempt;
    tasks_.erase(job_id);  // `t` is gone from here on
    return FinishJob(job,
                     "failed",
                     ErrorJson("retries_exhausted",
                               "attempt " + std::to_string(attempt) + " ended " + outcome + " (" +
                                   error.value("message", std::string("no detail")) + "); " +
                                   std::to_string(max_retries) + " retries already spent"),
                     now);
  }
  const int64_t backoff = costs_retry ? std::min<int64_t>(60'000, 1000LL << std::min<int64_t>(job.retries - 1, 6)) : 0;
  job.status = "queued";
  job.not_before_ms = now + backoff;
  if (Status s = md_.UpdateJob(job); !s.ok()) return s;
  AddEvent(md_, job_id,
           "Attempt " + std::to_string(t.attempt) + " " + outcome +
               (error.is_object() ? ": " + error.value("message", std::string()) : std::string()) +
               "; requeued" + (backoff ? " (retry in " + std::to_string(backoff / 1000) + " s)" : "") +
               (job.resume_step ? ", resuming from step " + std::to_string(job.resume_step) : ""),
           costs_retry ? "warn" : "info");
  Task copy = t;
  copy.not_before_ms = job.not_before_ms;
  copy.seq = next_seq_++;
  Enqueue(std::move(copy));
  return Status();
}

// ----------------------------------------------------------------------------
// dispatch

bool Runtime::DispatchSample(int64_t now) {
  if (samples_.empty()) return false;
  std::shared_ptr<SampleCall> call = samples_.front();
  Worker* pick = nullptr;
  for (auto& [id, w] : workers_) {
    if (w.rec.state != "idle" || !w.rec.deployment.empty()) continue;
    if (w.rec.model == call->base_model) {
      pick = &w;
      break;
    }
    if (!pick) pick = &w;
  }
  if (!pick) return false;  // DispatchOne starts a worker for it
  samples_.pop_front();
  Worker& w = *pick;
  call->worker = w.rec.id;
  call->started_ms = now;
  w.sample = call;
  w.rec.state = "busy";
  w.rec.job_id.clear();
  w.rec.since_ms = now;
  w.rec.last_org = call->org_id;
  SwitchSegment(w, now, "sampling", call->org_id, call->id, call->scope, call->run);
  SaveWorker(w);
  cv_.notify_all();
  return true;
}

void Runtime::EndSample(Worker& w, int64_t now) {
  if (!w.sample) return;
  if (!w.sample->done) {
    w.sample->done = true;
    w.sample->error = Status(Code::kUnavailable, "the worker running this sampling call went away; retry", "model");
  }
  w.sample->finished_ms = now;
  w.sample.reset();
  cv_.notify_all();
}

// ----------------------------------------------------------------------------
// deployments

int Runtime::LiveReplicas(const std::string& dep_id) const {
  int n = 0;
  for (const auto& [id, w] : workers_) n += w.rec.deployment == dep_id && w.rec.state != "stopping";
  return n;
}

void Runtime::StopWorker(Worker& w, const std::string& reason, int64_t grace_ms) {
  w.rec.state = "stopping";
  w.rec.exit_reason = reason;
  w.rec.since_ms = clock_.NowMs();
  SaveWorker(w);
  exec_.Stop(w.rec.id, grace_ms);
  cv_.notify_all();  // its long poll answers "exit"
}

bool Runtime::DispatchDeployments(int64_t now) {
  bool changed = false;
  for (auto& [dep_id, d] : deployments_) {
    // Waiting calls to free replicas, oldest call first.
    while (!d.waiting.empty()) {
      Worker* free = nullptr;
      for (auto& [id, w] : workers_) {
        if (w.rec.deployment == dep_id && w.rec.state == "idle" && !w.sample) {
          free = &w;
          break;
        }
      }
      if (!free) break;
      std::shared_ptr<SampleCall> call = d.waiting.front();
      d.waiting.pop_front();
      // It waited for a replica to start (a model load is reported by the
      // worker with the answer).
      if (free->rec.started_ms > call->created_ms) call->cold = true;
      call->worker = free->rec.id;
      call->started_ms = now;
      free->sample = call;
      free->rec.state = "busy";
      free->rec.since_ms = now;
      SaveWorker(*free);
      changed = true;
      cv_.notify_all();
    }
    // The replicas the load asks for: calls in flight over max_concurrency
    // per replica, between min_replicas and max_replicas.
    int busy = 0;
    for (const auto& [id, w] : workers_) busy += w.rec.deployment == dep_id && w.sample != nullptr;
    const int64_t load = busy + static_cast<int64_t>(d.waiting.size());
    const int64_t want =
        std::clamp<int64_t>((load + d.max_concurrency - 1) / d.max_concurrency, d.min_replicas, d.max_replicas);
    if (LiveReplicas(dep_id) >= want) continue;
    // An idle pool worker joins (the one with the base model loaded first);
    // else a new one starts while slots are free.
    const std::string base = d.rec.target.value("base_model", "");
    Worker* pick = nullptr;
    for (auto& [id, w] : workers_) {
      if (w.rec.state != "idle" || !w.rec.deployment.empty() || w.sample) continue;
      if (w.rec.model == base) {
        pick = &w;
        break;
      }
      if (!pick) pick = &w;
    }
    if (pick) {
      pick->rec.deployment = dep_id;
      pick->rec.last_org = d.rec.org_id;
      pick->warmed = false;
      pick->idle_since_ms = now;
      SwitchSegment(*pick, now, "deployment", d.rec.org_id, dep_id, d.scope, d.run);
      SaveWorker(*pick);
      cv_.notify_all();  // its long poll hands it the checkpoint to load
      changed = true;
      continue;
    }
    if (static_cast<int>(workers_.size()) >= opt_.slots || now < no_start_before_ms_) continue;
    bool cold = false;
    if (!StartWorker(now, d.rec.org_id, dep_id, &cold, dep_id, d.scope, d.run)) continue;
    // The calls waiting now wait for this start: they report a cold start.
    for (auto& c : d.waiting) c->cold = true;
    changed = true;
  }
  return changed;
}

void Runtime::AddDeploymentLocked(const DeploymentRecord& rec) {
  Deployment d;
  d.rec = rec;
  d.min_replicas = rec.request.value("min_replicas", int64_t{0});
  d.max_replicas = std::max<int64_t>(1, rec.request.value("max_replicas", int64_t{1}));
  d.window_ms = static_cast<int64_t>(rec.request.value("scaledown_window_s", 60.0) * 1000);
  d.max_concurrency = std::max<int64_t>(1, rec.request.value("max_concurrency", int64_t{1}));
  d.scope = rec.target.value("scope", "dedicated");
  d.run = RunOfCheckpointPrefix(rec.target.value("checkpoint_prefix", ""));
  deployments_[rec.id] = std::move(d);
}

Result<DeploymentRecord> Runtime::CreateDeployment(DeploymentRecord d, bool* created) {
  std::lock_guard<std::mutex> lock(mu_);
  if (opt_.max_deployments_per_org > 0) {
    int live = 0;
    bool same_name = false;
    for (const auto& [id, x] : deployments_) {
      live += x.rec.org_id == d.org_id;
      same_name |= x.rec.org_id == d.org_id && x.rec.name == d.name;
    }
    if (!same_name && live >= opt_.max_deployments_per_org) {
      return Status(Code::kResourceExhausted,
                    "your organisation has " + std::to_string(live) + " live deployments, its limit (" +
                        std::to_string(opt_.max_deployments_per_org) + "); delete one first",
                    "org_cap:max_deployments");
    }
  }
  auto rec = md_.CreateDeployment(std::move(d), created);
  if (!rec.ok()) return rec.status();
  if (*created) AddDeploymentLocked(rec.value());
  const int64_t now = clock_.NowMs();
  while (DispatchOne(now)) {
  }
  return rec;
}

Result<DeploymentRecord> Runtime::DeleteDeployment(const std::string& org_id, const std::string& id_or_name) {
  std::lock_guard<std::mutex> lock(mu_);
  auto rec = md_.GetDeployment(org_id, id_or_name);
  if (!rec.ok() || rec.value().deleted_at) return rec;
  DeploymentRecord d = rec.value();
  d.deleted_at = clock_.NowMs() / 1000;
  if (Status s = md_.MarkDeploymentDeleted(d.id, d.deleted_at); !s.ok()) return s;
  if (auto it = deployments_.find(d.id); it != deployments_.end()) {
    for (auto& call : it->second.waiting) {
      call->done = true;
      call->error = Status(Code::kNotFound, "deployment " + d.name + " was deleted", "model");
    }
    deployments_.erase(it);
  }
  for (auto& [id, w] : workers_) {
    if (w.rec.deployment == d.id && w.rec.state != "stopping") StopWorker(w, "deployment deleted", 5000);
  }
  cv_.notify_all();
  return d;
}

Json Runtime::DeploymentState(const std::string& id, const std::string& scope) {
  std::lock_guard<std::mutex> lock(mu_);
  const int64_t now = clock_.NowMs();
  Json replicas = Json::array();
  int64_t busy = 0;
  double open_s = 0;
  for (const auto& [wid, w] : workers_) {
    if (w.rec.deployment != id) continue;
    replicas.push_back({{"worker", wid},
                        {"state", w.rec.state},
                        {"since", w.rec.since_ms / 1000},
                        {"requested_at", w.rec.requested_ms / 1000}});
    busy += w.sample != nullptr;
    if (w.rec.seg_line == "deployment" && w.rec.seg_job == id) {
      open_s += static_cast<double>(std::max<int64_t>(0, now - w.rec.seg_start_ms)) / 1000.0;
    }
  }
  auto d = deployments_.find(id);
  return {{"replicas", replicas},
          {"busy", busy},
          {"waiting", d == deployments_.end() ? 0 : static_cast<int64_t>(d->second.waiting.size())},
          {"open_seconds", open_s},
          {"price_per_replica_second", scope == "serverless" ? 0.0 : opt_.price_per_slot_second}};
}

bool Runtime::DispatchOne(int64_t now) {
  if (stopping_) return false;  // shutting down: requeued tasks wait for the next start
  if (DispatchDeployments(now)) return true;
  if (DispatchSample(now)) return true;
  const int64_t t0 = SteadyNs();
  // The organisation with the fewest tasks running; among equals, the one
  // served least recently (round robin), then the longest waiting task.
  Task* best = nullptr;
  int best_running = 0;
  int64_t best_served = 0;
  for (auto& [org, dq] : queue_) {
    for (const std::string& id : dq) {
      Task& t = tasks_[id];
      if (t.not_before_ms > now) continue;
      const int r = running_[org];
      const int64_t served = last_served_[org];
      if (!best || r < best_running || (r == best_running && served < best_served) ||
          (r == best_running && served == best_served && t.seq < best->seq)) {
        best = &t;
        best_running = r;
        best_served = served;
      }
      break;  // the first ready task of each organisation
    }
  }
  if (!best) {
    // Nothing to train, but a sampling call may need a worker started.
    if (samples_.empty()) return false;
    int live_starting = 0;
    for (const auto& [id, w] : workers_) live_starting += w.rec.state == "starting" && w.rec.deployment.empty();
    if (static_cast<int>(workers_.size()) >= opt_.slots || live_starting >= static_cast<int>(samples_.size()) ||
        now < no_start_before_ms_) {
      return false;
    }
    const auto& c = samples_.front();
    return StartWorker(now, c->org_id, c->id, &c->cold, "", c->scope, c->run);
  }
  // A warm worker with the same base model first, then any idle worker.
  Worker* pick = nullptr;
  int starting = 0;
  for (auto& [id, w] : workers_) {
    if (!w.rec.deployment.empty()) continue;  // replicas serve their deployment only
    if (w.rec.state == "starting") ++starting;
    if (w.rec.state != "idle") continue;
    if (w.rec.model == best->model) {
      pick = &w;
      break;
    }
    if (!pick) pick = &w;
  }
  const int64_t decision_ns = SteadyNs() - t0;
  if (pick) {
    last_dispatch_ns_ = decision_ns;
    Status s = Assign(*best, *pick, now);
    if (!s.ok()) std::fprintf(stderr, "burst: dispatch of %s failed: %s\n", best->job_id.c_str(), s.ToString().c_str());
    return s.ok();
  }
  // No idle worker: start one while slots are free (one per waiting task).
  size_t queued = 0;
  for (const auto& [org, dq] : queue_) queued += dq.size();
  if (static_cast<int>(workers_.size()) >= opt_.slots || static_cast<size_t>(starting) >= queued + samples_.size()) {
    return false;
  }
  if (now < no_start_before_ms_) return false;
  last_dispatch_ns_ = decision_ns;
  return StartWorker(now, best->org_id, best->job_id, nullptr, "", best->scope, best->run);
}

bool Runtime::StartWorker(int64_t now, const std::string& org, const std::string& for_id, bool* cold,
                          const std::string& deployment, const std::string& scope, const std::string& run) {
  std::vector<bool> used(static_cast<size_t>(opt_.slots), false);
  for (const auto& [id, w] : workers_)
    if (w.rec.slot >= 0 && w.rec.slot < opt_.slots) used[static_cast<size_t>(w.rec.slot)] = true;
  int slot = 0;
  while (slot < opt_.slots && used[static_cast<size_t>(slot)]) ++slot;
  Worker w;
  w.rec.id = NewId("wrk");
  const std::string token = NewSecret("bwt");
  w.rec.token_sha256 = Sha256Hex(token);
  w.rec.state = "starting";
  w.rec.slot = slot;
  w.rec.requested_ms = now;
  w.rec.since_ms = now;
  w.rec.last_org = org;
  w.rec.deployment = deployment;
  // A sampling call's cold start is part of that call's cost (its line is
  // "sampling"); a job's is its "startup" line; a replica's whole life is
  // its deployment's.
  SwitchSegment(w, now, !deployment.empty() ? "deployment" : cold ? "sampling" : "startup", org, for_id, scope, run);
  auto pid = exec_.Start(WorkerLaunch{w.rec.id, token, slot, opt_.threads_per_slot});
  if (!pid.ok()) {
    ++start_failures_;
    no_start_before_ms_ = now + std::min<int64_t>(60'000, 500LL << std::min<int64_t>(start_failures_ - 1, 7));
    std::fprintf(stderr, "burst: %s\n", pid.status().ToString().c_str());
    w.rec.state = "exited";
    w.rec.exited_ms = now;
    w.rec.exit_reason = pid.status().message();
    SaveWorker(w);
    return false;
  }
  w.rec.pid = pid.value();
  SaveWorker(w);
  if (cold) *cold = true;
  else if (deployment.empty()) AddEvent(md_, for_id, "Starting worker " + w.rec.id + " (slot " + std::to_string(slot) + ")");
  tokens_[w.rec.token_sha256] = w.rec.id;
  workers_[w.rec.id] = std::move(w);
  return true;
}

Status Runtime::Assign(Task& t, Worker& w, int64_t now) {
  auto rec = md_.GetJobById(t.job_id);
  if (!rec.ok()) return rec.status();
  JobRecord job = rec.value();
  job.attempts += 1;
  job.status = "running";
  if (job.started_at == 0) job.started_at = now / 1000;
  if (Status s = md_.UpdateJob(job); !s.ok()) return s;
  AttemptRecord a;
  a.job_id = job.id;
  a.attempt = job.attempts;
  a.worker_id = w.rec.id;
  a.started_ms = now;
  a.resumed_from = job.resume_step;
  if (Status s = md_.AddAttempt(a); !s.ok()) return s;
  RemoveFromQueue(t.org_id, t.job_id);
  t.worker = w.rec.id;
  t.attempt = job.attempts;
  t.lease_until_ms = now + opt_.lease_ttl_ms;
  t.attempt_start_ms = now;
  t.delivered = false;
  ++running_[t.org_id];
  running_ids_.insert(t.job_id);
  last_served_[t.org_id] = ++serve_counter_;
  w.rec.state = "busy";
  w.rec.job_id = t.job_id;
  w.rec.attempt = t.attempt;
  w.rec.since_ms = now;
  w.rec.last_org = t.org_id;
  SwitchSegment(w, now, t.line, t.org_id, t.job_id, t.scope, t.run);
  SaveWorker(w);
  AddEvent(md_, job.id,
           "Attempt " + std::to_string(t.attempt) + " assigned to worker " + w.rec.id +
               (w.rec.model == t.model ? " (base model already loaded)" : "") +
               (job.resume_step ? "; resuming from step " + std::to_string(job.resume_step) : ""));
  cv_.notify_all();
  return Status();
}

// ----------------------------------------------------------------------------
// workers

Result<std::string> Runtime::AuthenticateWorker(const std::string& token) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = tokens_.find(Sha256Hex(token));
  if (it == tokens_.end() || !workers_.count(it->second)) {
    return Status(Code::kNotFound, "unknown worker token", "authorization");
  }
  return it->second;
}

Result<Json> Runtime::Register(const std::string& worker_id, int64_t pid) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = workers_.find(worker_id);
  if (it == workers_.end()) return Status(Code::kNotFound, "no worker " + worker_id, "worker");
  Worker& w = it->second;
  const int64_t now = clock_.NowMs();
  if (w.rec.state == "starting") {
    start_failures_ = 0;
    w.rec.state = "idle";
    w.rec.started_ms = now;
    w.rec.since_ms = now;
    if (pid > 0) w.rec.pid = pid;
    w.idle_since_ms = now;
    SwitchSegment(w, now, "idle", w.rec.seg_org, "");
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

Result<std::optional<Json>> Runtime::Lease(const std::string& worker_id, const std::string& loaded_model,
                                           int64_t wait_ms) {
  std::unique_lock<std::mutex> lock(mu_);
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(std::max<int64_t>(0, wait_ms));
  {
    auto it = workers_.find(worker_id);
    if (it == workers_.end()) return Status(Code::kNotFound, "no worker " + worker_id, "worker");
    if (it->second.rec.model != loaded_model) {
      it->second.rec.model = loaded_model;
      SaveWorker(it->second);
    }
    while (DispatchOne(clock_.NowMs())) {
    }
  }
  for (;;) {
    auto it = workers_.find(worker_id);
    if (it == workers_.end() || stopping_ || it->second.rec.state == "stopping") {
      return std::optional<Json>(Json{{"action", "exit"}});
    }
    Worker& w = it->second;
    if (w.sample && !w.sample->delivered) {
      w.sample->delivered = true;
      w.warmed = true;  // a replica's call loads the checkpoint itself
      Json task = w.sample->task;
      task["kind"] = "sample";
      task["id"] = w.sample->id;
      task["org"] = w.sample->org_id;
      task["model"] = w.sample->base_model;
      task["stream"] = w.sample->stream;
      return std::optional<Json>(task);
    }
    if (!w.rec.deployment.empty() && !w.warmed && !w.sample) {
      // A new replica loads its checkpoint before the first call needs it.
      auto d = deployments_.find(w.rec.deployment);
      if (d != deployments_.end()) {
        w.warmed = true;
        const Json& t = d->second.rec.target;
        return std::optional<Json>(Json{{"kind", "warm"},
                                        {"deployment", d->first},
                                        {"model", t.value("base_model", "")},
                                        {"checkpoint_prefix", t.value("checkpoint_prefix", "")},
                                        {"full", t.value("full", false)}});
      }
    }
    if (!w.rec.job_id.empty()) {
      auto t = tasks_.find(w.rec.job_id);
      if (t != tasks_.end() && t->second.worker == worker_id) {
        auto rec = md_.GetJobById(t->second.job_id);
        if (!rec.ok()) return rec.status();
        const JobRecord& job = rec.value();
        t->second.delivered = true;
        t->second.lease_until_ms = clock_.NowMs() + opt_.lease_ttl_ms;
        const std::string prefix = "orgs/" + job.org_id + "/jobs/" + job.id + "/";
        return std::optional<Json>(Json{{"job", job.id},
                                        {"attempt", t->second.attempt},
                                        {"org", job.org_id},
                                        {"kind", job.spec.value("kind", std::string("train"))},
                                        {"model", job.spec.value("base_model", job.spec.value("model", ""))},
                                        {"model_name", job.spec.value("model", "")},
                                        {"recipe", job.spec.value("recipe", Json::object())},
                                        {"training_file", job.spec.value("training_file", "")},
                                        {"validation_file", job.spec.value("validation_file", Json())},
                                        {"train_key", job.spec.value("train_key", "")},
                                        {"valid_key", job.spec.value("valid_key", "")},
                                        {"store_prefix", prefix},
                                        {"eval_key", job.spec.value("eval_key", "")},
                                        {"eval_file", job.spec.value("eval_file", "")},
                                        {"checkpoint_prefix", job.spec.value("checkpoint_prefix", "")},
                                        {"full", job.spec.value("full", false)},
                                        {"max_seq_len", job.spec.value("max_seq_len", int64_t{512})},
                                        {"batch_size", job.spec.value("batch_size", int64_t{8})},
                                        {"resume_step", job.resume_step},
                                        {"total_steps", job.total_steps}});
      }
    }
    if (cv_.wait_until(lock, deadline) == std::cv_status::timeout) {
      auto again = workers_.find(worker_id);
      // Loop again only for work assigned to this worker and not yet handed over.
      if (again != workers_.end()) {
        const Worker& w = again->second;
        auto t = w.rec.job_id.empty() ? tasks_.end() : tasks_.find(w.rec.job_id);
        if ((w.sample && !w.sample->delivered) ||
            (t != tasks_.end() && t->second.worker == worker_id && !t->second.delivered)) {
          continue;
        }
        // A replica stays while its deployment holds it, whatever its own
        // scaledown window says.
        if (!w.rec.deployment.empty()) return std::optional<Json>(Json{{"action", "hold"}});
      }
      return std::optional<Json>();
    }
  }
}

Result<std::string> Runtime::Heartbeat(const std::string& worker_id, const std::string& job_id, int64_t attempt,
                                       int64_t step) {
  std::lock_guard<std::mutex> lock(mu_);
  auto t = RunningTask(worker_id, job_id, attempt);
  if (!t.ok()) return t.status();
  const int64_t now = clock_.NowMs();
  t.value()->lease_until_ms = now + opt_.lease_ttl_ms;
  auto w = workers_.find(worker_id);
  if (w != workers_.end()) w->second.rec.heartbeat_ms = now;
  if (step > t.value()->step) {
    t.value()->step = step;
    auto rec = md_.GetJobById(job_id);
    if (rec.ok() && rec.value().status == "running" && step > rec.value().step) {
      rec.value().step = step;
      md_.UpdateJob(rec.value());
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
  for (auto& e : events) {
    e.job_id = job_id;
    if (e.type == "metrics" && e.data.is_object()) {
      step = std::max<int64_t>(step, e.data.value("step", int64_t{0}));
      tokens = std::max<int64_t>(tokens, e.data.value("tokens", int64_t{0}));
      total = std::max<int64_t>(total, e.data.value("total_steps", int64_t{0}));
    }
  }
  if (Status s = md_.AddEvents(events); !s.ok()) return s;
  std::vector<LogRecord> lines;
  for (auto& l : logs) lines.push_back(LogRecord{0, job_id, attempt, 0, std::move(l)});
  if (Status s = md_.AddLogs(lines); !s.ok()) return s;
  if (step > 0 || total > 0) {
    auto rec = md_.GetJobById(job_id);
    if (!rec.ok()) return rec.status();
    JobRecord job = rec.value();
    job.step = std::max(job.step, step);
    job.trained_tokens = std::max(job.trained_tokens, tokens);
    if (total > 0) job.total_steps = total;
    if (Status s = md_.UpdateJob(job); !s.ok()) return s;
    t.value()->step = std::max(t.value()->step, step);
  }
  return Status();
}

Status Runtime::Checkpoint(const std::string& worker_id, const std::string& job_id, int64_t attempt, int64_t step,
                           const Json& metrics) {
  std::lock_guard<std::mutex> lock(mu_);
  auto t = RunningTask(worker_id, job_id, attempt);
  if (!t.ok()) return t.status();
  auto rec = md_.GetJobById(job_id);
  if (!rec.ok()) return rec.status();
  JobRecord job = rec.value();
  CheckpointRecord c;
  c.job_id = job_id;
  c.step = step;
  c.metrics = metrics.is_object() ? metrics : Json::object();
  c.prefix = "orgs/" + job.org_id + "/jobs/" + job_id + "/checkpoints/" + StepName(step) + "/";
  if (Status s = md_.AddCheckpoint(c); !s.ok()) return s;
  if (step > job.resume_step) {
    job.resume_step = step;
    if (Status s = md_.UpdateJob(job); !s.ok()) return s;
  }
  AddEvent(md_, job_id, "Checkpoint " + job_id + ":step-" + std::to_string(step) + " saved");
  return Status();
}

Status Runtime::Finish(const std::string& worker_id, const std::string& job_id, int64_t attempt,
                       const std::string& outcome, const Json& error, bool retryable, int64_t step,
                       int64_t trained_tokens, const Json& result) {
  std::lock_guard<std::mutex> lock(mu_);
  auto tr = RunningTask(worker_id, job_id, attempt);
  if (!tr.ok()) return tr.status();
  Task& t = *tr.value();
  const int64_t now = clock_.NowMs();
  const std::string org = t.org_id;
  // Serverless scope bills the tokens of a completed or cancelled task (the
  // run's cumulative count, so a resumed run's tokens count once).
  const std::string line = t.line, scope = t.scope, run = t.run;
  int64_t tokens = 0;
  double token_cost = 0;
  // A timed-out job is failed (not billed) however the worker ended it.
  const bool billable = t.end_as.empty() ? outcome == "completed" : t.end_as == "cancelled";
  if (scope == "serverless" && billable) {
    if (line == "evaluation") {
      tokens = result.is_object() ? result.value("metrics", Json::object()).value("tokens", int64_t{0}) : 0;
      token_cost = static_cast<double>(tokens) / 1e6 * opt_.price_prefill_per_mtok;
    } else {
      tokens = trained_tokens;
      token_cost = static_cast<double>(tokens) / 1e6 * opt_.price_train_per_mtok;
    }
  }
  Status s;
  if (!t.end_as.empty()) {
    s = EndAttempt(t, now, t.end_as, error, false, false);
  } else if (outcome == "completed") {
    auto rec = md_.GetJobById(job_id);
    if (!rec.ok()) return rec.status();
    JobRecord job = rec.value();
    s = EndAttempt(t, now, "completed", Json(), false, false);
    if (s.ok()) {
      job = md_.GetJobById(job_id).value();
      job.step = step;
      job.trained_tokens = trained_tokens;
      job.fine_tuned_model = job_id + ":step-" + std::to_string(step);
      job.result = result;
      s = FinishJob(job, "succeeded", Json(), now);
    }
  } else if (outcome == "preempted" || outcome == "cancelled") {
    s = EndAttempt(t, now, "preempted", error, true, false);
  } else if (outcome == "failed") {
    if (retryable) {
      s = EndAttempt(t, now, "failed", error, true, true);
    } else {
      s = EndAttempt(t, now, "failed", error, false, false);
      if (s.ok()) {
        auto rec = md_.GetJobById(job_id);
        if (!rec.ok()) return rec.status();
        JobRecord job = rec.value();
        s = FinishJob(job, "failed", error.is_object() ? error : ErrorJson("internal", "worker reported a failure"),
                      now);
      }
    }
  } else {
    return Status(Code::kInvalidArgument, "unknown outcome \"" + outcome + "\"", "outcome");
  }
  if (!s.ok()) return s;
  auto w = workers_.find(worker_id);
  if (w != workers_.end() && tokens > 0) {
    ChargeTokens(w->second, now, line, org, job_id, run, tokens, token_cost);
    SaveWorker(w->second);  // whatever state the worker is in
  }
  if (w != workers_.end() && outcome == "preempted") {
    // A preempted worker is on its way out: it takes no more tasks.
    w->second.rec.state = "stopping";
    w->second.rec.job_id.clear();
    w->second.rec.since_ms = now;
    w->second.rec.exit_reason = "preempted";
    SwitchSegment(w->second, now, "idle", org, "");
    SaveWorker(w->second);
  } else if (w != workers_.end() && w->second.rec.state == "busy") {
    w->second.rec.state = "idle";
    w->second.rec.job_id.clear();
    w->second.rec.since_ms = now;
    w->second.idle_since_ms = now;
    SwitchSegment(w->second, now, "idle", org, "");
    SaveWorker(w->second);
  }
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
  if (w.sample && !w.sample->delivered) {
    w.sample->worker.clear();
    if (w.sample->deployment.empty()) {
      samples_.push_front(w.sample);
    } else if (auto d = deployments_.find(w.sample->deployment); d != deployments_.end()) {
      d->second.waiting.push_front(w.sample);  // its deployment's replicas only
    } else {
      w.sample->done = true;
      w.sample->error = Status(Code::kNotFound, "deployment " + w.sample->deployment + " was deleted", "model");
    }
    w.sample.reset();
    cv_.notify_all();
  }
  if (!w.rec.job_id.empty()) {
    auto t = tasks_.find(w.rec.job_id);
    if (t != tasks_.end() && t->second.worker == worker_id && !t->second.delivered) {
      EndAttempt(t->second, now, "lost", ErrorJson("worker_left", "worker " + worker_id + " left before taking it"),
                 t->second.end_as.empty(), false);
    }
    w.rec.job_id.clear();
  }
  if (w.rec.state == "busy") SwitchSegment(w, now, "idle", w.rec.last_org, "");
  w.rec.state = "stopping";
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
    auto t = tasks_.find(w.rec.job_id);
    if (t != tasks_.end() && t->second.worker == w.rec.id) {
      const std::string outcome = t->second.end_as.empty() ? "lost" : t->second.end_as;
      EndAttempt(t->second, at, outcome, ErrorJson("worker_lost", "worker " + w.rec.id + " exited (" + e.how + ")"),
                 t->second.end_as.empty(), /*costs_retry=*/t->second.delivered);
    }
  }
  if (w.rec.state == "starting") {
    ++start_failures_;
    no_start_before_ms_ = at + std::min<int64_t>(60'000, 500LL << std::min<int64_t>(start_failures_ - 1, 7));
    std::fprintf(stderr, "burst: worker %s exited before registering (%s); next start in %lld ms\n",
                 w.rec.id.c_str(), e.how.c_str(), static_cast<long long>(no_start_before_ms_ - at));
  }
  SwitchSegment(w, at, "", "", "");
  w.rec.state = "exited";
  w.rec.exited_ms = at;
  w.rec.job_id.clear();
  if (w.rec.exit_reason.empty()) w.rec.exit_reason = e.how;
  else w.rec.exit_reason += " (" + e.how + ")";
  SaveWorker(w);
  tokens_.erase(w.rec.token_sha256);
  workers_.erase(it);
  cv_.notify_all();
}

// ----------------------------------------------------------------------------
// sampling

std::shared_ptr<SampleCall> Runtime::Sample(std::shared_ptr<SampleCall> call, int64_t wait_ms, bool until_started) {
  std::unique_lock<std::mutex> lock(mu_);
  const int64_t now = clock_.NowMs();
  size_t waiting = samples_.size();
  for (const auto& [id, d] : deployments_) waiting += d.waiting.size();
  if (static_cast<int64_t>(waiting) >= opt_.max_waiting_samples) {
    // Each waiting call holds a request thread: past the bound, say so at
    // once rather than let the workers' own requests queue behind them.
    call->done = true;
    call->error = Status(Code::kResourceExhausted,
                         std::to_string(waiting) + " sampling calls are already waiting for a worker; retry later",
                         "capacity");
    return call;
  }
  if (opt_.max_sampling_calls_per_org > 0) {
    int in_flight = 0;
    for (const auto& c : samples_) in_flight += c->org_id == call->org_id;
    for (const auto& [id, d] : deployments_)
      for (const auto& c : d.waiting) in_flight += c->org_id == call->org_id;
    for (const auto& [id, w] : workers_) in_flight += w.sample && w.sample->org_id == call->org_id;
    if (in_flight >= opt_.max_sampling_calls_per_org) {
      call->done = true;
      call->error = Status(Code::kResourceExhausted,
                           "your organisation has " + std::to_string(in_flight) +
                               " sampling calls in flight, its limit (" +
                               std::to_string(opt_.max_sampling_calls_per_org) + ")",
                           "org_cap:max_sampling_calls");
      return call;
    }
  }
  call->created_ms = now;
  if (!call->deployment.empty()) {
    auto d = deployments_.find(call->deployment);
    if (d == deployments_.end()) {
      call->done = true;
      call->error = Status(Code::kNotFound, "deployment " + call->deployment + " was deleted", "model");
      return call;
    }
    d->second.waiting.push_back(call);
  } else {
    samples_.push_back(call);
  }
  while (DispatchOne(now)) {
  }
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(wait_ms);
  while (!call->done && !(until_started && !call->worker.empty())) {
    if (cv_.wait_until(lock, deadline) != std::cv_status::timeout) continue;
    if (call->worker.empty()) {
      // Still waiting for a worker: the pool is full (capacity, not quota).
      auto pos = std::find(samples_.begin(), samples_.end(), call);
      if (pos != samples_.end()) samples_.erase(pos);
      if (auto d = deployments_.find(call->deployment); d != deployments_.end()) {
        auto& q = d->second.waiting;
        if (auto p = std::find(q.begin(), q.end(), call); p != q.end()) q.erase(p);
      }
      call->done = true;
      call->error = Status(Code::kResourceExhausted,
                           "no worker became free within " + std::to_string(wait_ms / 1000) +
                               " s: every slot is busy; retry later",
                           "capacity");
      break;
    }
    // Running: its answer comes (a stuck worker is stopped by Tick).
    deadline = std::chrono::steady_clock::now() + std::chrono::seconds(1);
  }
  return call;
}

std::vector<Json> Runtime::NextChunks(const std::shared_ptr<SampleCall>& call, int64_t wait_ms, bool* done) {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait_for(lock, std::chrono::milliseconds(wait_ms), [&] { return !call->chunks.empty() || call->done; });
  std::vector<Json> out(std::make_move_iterator(call->chunks.begin()), std::make_move_iterator(call->chunks.end()));
  call->chunks.clear();
  *done = call->done;
  return out;
}

Status Runtime::SampleChunks(const std::string& worker_id, const std::string& call_id, const Json& chunks) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = workers_.find(worker_id);
  if (it == workers_.end() || !it->second.sample || it->second.sample->id != call_id) {
    return Status(Code::kFailedPrecondition, "sampling call " + call_id + " is not " + worker_id + "'s", "lease_lost");
  }
  for (const Json& c : chunks) it->second.sample->chunks.push_back(c);
  cv_.notify_all();
  return Status();
}

Status Runtime::SampleResult(const std::string& worker_id, const std::string& call_id, const Json& result,
                             const Json& error) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = workers_.find(worker_id);
  if (it == workers_.end() || !it->second.sample || it->second.sample->id != call_id) {
    return Status(Code::kFailedPrecondition, "sampling call " + call_id + " is not " + worker_id + "'s", "lease_lost");
  }
  Worker& w = it->second;
  const int64_t now = clock_.NowMs();
  w.sample->done = true;
  if (error.is_object()) {
    w.sample->error = Status(CodeFromName(error.value("code", "")).value_or(Code::kInternal),
                             error.value("message", std::string("sampling failed")),
                             error.value("param", Json()).is_string() ? error["param"].get<std::string>() : "");
  } else if (!result.is_object() || !result.contains("samples")) {
    w.sample->error = Status(Code::kInternal, "the worker answered without samples", "");
  } else {
    w.sample->result = result;
    if (result.value("loaded", false)) w.sample->cold = true;  // it waited for a model load
  }
  const std::string dep = w.sample->deployment;
  if (!dep.empty()) md_.CountDeploymentRequest(dep, now, w.sample->cold);
  if (w.sample->scope == "serverless" && result.is_object()) {
    const int64_t prefill = result.value("prompt_tokens", int64_t{0});
    int64_t sampled = 0;
    for (const Json& smp : result.value("samples", Json::array())) sampled += static_cast<int64_t>(smp.value("token_ids", Json::array()).size());
    ChargeTokens(w, now, dep.empty() ? "sampling" : "deployment", w.sample->org_id, dep.empty() ? call_id : dep,
                 w.sample->run, prefill + sampled,
                 (static_cast<double>(prefill) * opt_.price_prefill_per_mtok +
                  static_cast<double>(sampled) * opt_.price_sample_per_mtok) / 1e6);
  }
  EndSample(w, now);
  SwitchSegment(w, now, "idle", w.rec.last_org, "");
  if (w.rec.state == "busy") {  // a worker told to stop meanwhile stays stopping
    w.rec.state = "idle";
    w.rec.since_ms = now;
    w.idle_since_ms = now;
  }
  SaveWorker(w);
  while (DispatchOne(now)) {
  }
  return Status();
}

// ----------------------------------------------------------------------------
// ticking

void Runtime::Tick() {
  std::lock_guard<std::mutex> lock(mu_);
  TickLocked();
}

void Runtime::TickLocked() {
  const int64_t now = clock_.NowMs();
  for (const WorkerExit& e : exec_.Poll()) ObserveExit(e);
  std::vector<std::string> running(running_ids_.begin(), running_ids_.end());
  for (const std::string& id : running) {
    auto it = tasks_.find(id);
    if (it == tasks_.end() || it->second.worker.empty()) continue;
    Task& t = it->second;
    auto w = workers_.find(t.worker);
    if (w == workers_.end()) {
      EndAttempt(t, now, t.end_as.empty() ? "lost" : t.end_as, ErrorJson("worker_lost", "worker " + t.worker + " is gone"),
                 t.end_as.empty(), true);
      continue;
    }
    if (now > t.lease_until_ms) {
      // No heartbeat within the lease TTL: the task goes elsewhere, and the
      // worker (hung or cut off) is stopped so it cannot write any more.
      const std::string wid = t.worker;
      EndAttempt(t, now, t.end_as.empty() ? "lost" : t.end_as,
                 ErrorJson("lease_expired", "no heartbeat from worker " + wid + " for " +
                                                std::to_string(opt_.lease_ttl_ms / 1000) + " s"),
                 t.end_as.empty(), true);
      w->second.rec.state = "stopping";
      w->second.rec.job_id.clear();
      w->second.rec.exit_reason = "lease expired";
      SaveWorker(w->second);
      exec_.Stop(wid, 5000);
      continue;
    }
    if (t.end_as.empty() && t.timeout_ms > 0 && t.run_ms_before + (now - t.attempt_start_ms) > t.timeout_ms) {
      auto rec = md_.GetJobById(id);
      if (rec.ok()) {
        JobRecord job = rec.value();
        FinishJob(job, "failed",
                  ErrorJson("timeout", "the job ran longer than its timeout_s of " +
                                           std::to_string(t.timeout_ms / 1000) + " s",
                            "timeout_s"),
                  now);
      }
      t.end_as = "timeout";
      t.cancel = true;
      t.cancel_at_ms = now;
    }
    if (t.cancel && now - t.cancel_at_ms > 20'000 && w->second.rec.state != "stopping") {
      // The worker did not stop the task: stop the worker.
      w->second.rec.state = "stopping";
      w->second.rec.exit_reason = "did not stop a cancelled task";
      SaveWorker(w->second);
      exec_.Stop(t.worker, 5000);
    }
  }
  for (auto& [id, w] : workers_) {
    if (w.sample && w.rec.state == "busy" && now - w.sample->started_ms > 300'000) {
      w.rec.state = "stopping";
      w.rec.exit_reason = "a sampling call ran over 300 s";
      SaveWorker(w);
      exec_.Stop(id, 5000);
    }
    const bool stuck_starting = w.rec.state == "starting" && now - w.rec.requested_ms > 300'000;
    // Replicas go by their deployment's window (below), not the pool's.
    const bool idle_too_long = w.rec.deployment.empty() && w.rec.state == "idle" &&
                               now - w.idle_since_ms > opt_.scaledown_window_ms + 10'000;
    if (idle_too_long || stuck_starting) {
      w.rec.state = "stopping";
      w.rec.exit_reason = idle_too_long ? "idle past the scaledown window" : "did not register within 300 s";
      SaveWorker(w);
      exec_.Stop(id, 5000);
    }
  }
  // Replicas idle past their deployment's window go, down to min_replicas;
  // replicas of a deployment that is gone go at once.
  for (auto& [id, w] : workers_) {
    if (w.rec.deployment.empty() || w.rec.state == "stopping") continue;
    auto d = deployments_.find(w.rec.deployment);
    if (d == deployments_.end()) {
      StopWorker(w, "deployment deleted", 5000);
      continue;
    }
    if (w.rec.state == "idle" && !w.sample && d->second.waiting.empty() &&
        now - w.idle_since_ms > d->second.window_ms && LiveReplicas(d->first) > d->second.min_replicas) {
      StopWorker(w, "deployment " + d->second.rec.name + " scaled down (idle past its window)", 5000);
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
      cv_.wait_for(lock, std::chrono::milliseconds(period_ms), [this] { return stopping_; });
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
    cv_.notify_all();
  }
  if (ticker_.joinable()) ticker_.join();
  if (!stop_workers) return;
  // Wait for the workers to leave (they report preemptions meanwhile).
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(wait_ms);
  while (std::chrono::steady_clock::now() < deadline) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      for (const WorkerExit& e : exec_.Poll()) ObserveExit(e);
      if (workers_.empty()) return;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

// ----------------------------------------------------------------------------
// recovery after a restart

Status Runtime::Recover() {
  std::lock_guard<std::mutex> lock(mu_);
  const int64_t now = clock_.NowMs();
  auto deps = md_.ListDeployments("", /*include_deleted=*/false);
  if (!deps.ok()) return deps.status();
  for (const DeploymentRecord& d : deps.value()) AddDeploymentLocked(d);
  auto workers = md_.ListWorkers(true);
  if (!workers.ok()) return workers.status();
  for (WorkerRecord& r : workers.value()) {
    Worker w;
    w.rec = r;
    w.idle_since_ms = now;
    if (r.state == "starting" || r.state == "idle" || r.state == "busy" || r.state == "stopping") {
      if (exec_.Adopt(r.id, r.pid)) {
        if (w.rec.state == "busy" && w.rec.job_id.empty()) {  // it was sampling: that call is gone
          SwitchSegment(w, now, "idle", w.rec.last_org, "");
          w.rec.state = "idle";
          SaveWorker(w);
        }
        tokens_[w.rec.token_sha256] = r.id;
        workers_[r.id] = std::move(w);
        continue;
      }
    }
    // Gone while no control plane watched: billed until now, when its exit
    // was observed.
    SwitchSegment(w, now, "", "", "");
    w.rec.state = "exited";
    w.rec.exited_ms = now;
    w.rec.exit_reason = "gone while the control plane was down";
    SaveWorker(w);
  }
  auto open = md_.ListOpenAttempts();
  if (!open.ok()) return open.status();
  std::map<std::string, AttemptRecord> open_by_job;
  for (auto& a : open.value()) open_by_job[a.job_id] = a;
  auto active = md_.ListActiveJobs();
  if (!active.ok()) return active.status();
  std::set<std::string> seen;
  auto load = [&](const JobRecord& job) {
    Task t;
    t.job_id = job.id;
    t.org_id = job.org_id;
    t.model = job.spec.value("base_model", job.spec.value("model", ""));
    SetTaskBilling(t, job);
    t.seq = next_seq_++;
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
      if (Terminal(job.status)) {
        t.end_as = job.status == "failed" ? "timeout" : "cancelled";
        t.cancel = true;
        t.cancel_at_ms = now;
      }
      ++running_[t.org_id];
      running_ids_.insert(t.job_id);
      tasks_[t.job_id] = std::move(t);
    } else if (!Terminal(job.status)) {
      if (job.status != "queued") {
        JobRecord q = job;
        q.status = "queued";
        md_.UpdateJob(q);
      }
      Enqueue(std::move(t));
    }
  };
  for (const JobRecord& job : active.value()) {
    seen.insert(job.id);
    load(job);
  }
  for (auto& [job_id, a] : open_by_job) {
    if (seen.count(job_id)) continue;
    auto rec = md_.GetJobById(job_id);
    if (rec.ok()) load(rec.value());
  }
  return Status();
}

// ----------------------------------------------------------------------------
// inspection

Json Runtime::WorkerJson(const Worker& w) const {
  return {{"id", w.rec.id},
          {"object", "worker"},
          {"state", w.rec.state},
          {"slot", w.rec.slot},
          {"pid", w.rec.pid},
          {"model", w.rec.model.empty() ? Json() : Json(w.rec.model)},
          {"job", w.rec.job_id.empty() ? Json() : Json(w.rec.job_id)},
          {"sampling", w.sample ? Json(w.sample->id) : Json()},
          {"deployment", w.rec.deployment.empty() ? Json() : Json(w.rec.deployment)},
          {"since", w.rec.since_ms / 1000},
          {"requested_at", w.rec.requested_ms / 1000},
          {"started_at", w.rec.started_ms ? Json(w.rec.started_ms / 1000) : Json()},
          {"requested_ms", w.rec.requested_ms},
          {"started_ms", w.rec.started_ms ? Json(w.rec.started_ms) : Json()}};
}

Json Runtime::WorkersJson() {
  std::lock_guard<std::mutex> lock(mu_);
  Json data = Json::array();
  for (const auto& [id, w] : workers_) data.push_back(WorkerJson(w));
  size_t queued = 0;
  for (const auto& [org, dq] : queue_) queued += dq.size();
  return {{"object", "list"},
          {"data", data},
          {"slots", opt_.slots},
          {"threads_per_slot", opt_.threads_per_slot},
          {"slot_type", opt_.slot_type},
          {"queued", queued}};
}

size_t Runtime::QueuedCount() {
  std::lock_guard<std::mutex> lock(mu_);
  size_t n = 0;
  for (const auto& [org, dq] : queue_) n += dq.size();
  return n;
}

size_t Runtime::LiveWorkerCount() {
  std::lock_guard<std::mutex> lock(mu_);
  return workers_.size();
}

int64_t Runtime::last_dispatch_ns() {
  std::lock_guard<std::mutex> lock(mu_);
  return last_dispatch_ns_;
}

}  // namespace burst
