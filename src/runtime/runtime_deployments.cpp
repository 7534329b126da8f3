// Deployments: a name that routes sampling calls to replicas of one
// checkpoint. DispatchDeployments hands waiting calls to free replicas and
// sizes each deployment by its load (calls in flight over max_concurrency
// per replica, between min_replicas and max_replicas): an idle pool worker
// joins, warm with the base model first, else a new one starts. The tick
// stops replicas idle past their deployment's window.
#include <algorithm>

#include "runtime/runtime.h"
#include "runtime/runtime_internal.h"

namespace burst {
using namespace runtime_internal;

int Runtime::LiveReplicas(const std::string& dep_id) const {
  int n = 0;
  for (const auto& [id, w] : workers_)
    n += w.rec.deployment == dep_id && w.rec.state != WorkerState::kStopping;
  return n;
}

bool Runtime::ReplicaReady(const Worker& w, const std::string& loaded_model,
                           const std::vector<std::string>& checkpoints) const {
  if (w.rec.deployment.empty()) return false;
  const LiveDeployment* d = deployments_.Find(w.rec.deployment);
  if (d == nullptr) return false;
  const Json& t = d->rec.target;
  const std::string want = t.value("checkpoint_prefix", "");
  if (want.empty()) return !loaded_model.empty() && loaded_model == t.value("base_model", "");
  return std::find(checkpoints.begin(), checkpoints.end(), want) != checkpoints.end();
}

bool Runtime::DispatchDeployments(int64_t now) {
  bool changed = false;
  for (auto& [dep_id, d] : deployments_) {
    // Waiting calls to replicas, oldest call first: an idle replica, else
    // the one decoding the fewest calls, while it has room (max_concurrency
    // calls decode together as one batch).
    while (!d.waiting.empty()) {
      std::shared_ptr<WorkerCall> call = d.waiting.front();
      Worker* pick = nullptr;
      for (auto& [id, w] : workers_) {
        if (w.rec.deployment != dep_id) continue;
        if (w.rec.state == WorkerState::kIdle && w.calls.empty()) {
          pick = &w;
          break;
        }
        if (CanJoin(w, *call, d.max_concurrency) && (!pick || w.calls.size() < pick->calls.size())) pick = &w;
      }
      if (!pick) break;
      d.waiting.pop_front();
      // It waited for a replica to start (a model load is reported by the
      // worker with the answer).
      if (pick->rec.started_ms > call->created_ms) call->cold = true;
      AssignSample(*pick, call, now);
      changed = true;
    }
    // The replicas the load asks for: calls in flight over max_concurrency
    // per replica, between min_replicas and max_replicas.
    int64_t busy = 0;
    for (const auto& [id, w] : workers_)
      busy += w.rec.deployment == dep_id ? static_cast<int64_t>(w.calls.size()) : 0;
    if (LiveReplicas(dep_id) >= d.ReplicasWanted(busy)) continue;
    // An idle pool worker joins (the one with the base model loaded first);
    // else a new one starts while slots are free.
    // On the device the deployment asks for (its GPU claims in order of
    // preference, else a CPU slot).
    const std::string base = d.rec.target.value("base_model", "");
    const std::vector<DeviceClaim> claims = d.devices.empty() ? std::vector<DeviceClaim>{{}} : d.devices;
    Worker* pick = nullptr;
    for (const DeviceClaim& c : claims) {
      for (auto& [id, w] : workers_) {
        if (w.rec.state != WorkerState::kIdle || !w.rec.deployment.empty() || !w.calls.empty() ||
            !(w.claim() == c))
          continue;
        if (w.rec.model == base) {
          pick = &w;
          break;
        }
        if (!pick) pick = &w;
      }
      if (pick) break;
    }
    if (pick) {
      pick->rec.deployment = dep_id;
      pick->rec.last_org = d.rec.org_id;
      pick->warmed = false;
      pick->ready = false;
      pick->idle_since_ms = now;
      meter_.Switch(pick->rec, pick->usage, now, UsageLine::kDeployment, d.rec.org_id, dep_id, d.scope,
                    d.run);
      SaveWorker(*pick).IgnoreError(kKept);
      cv_.notify_all();  // its long poll hands it the checkpoint to load
      changed = true;
      continue;
    }
    auto room = std::find_if(claims.begin(), claims.end(),
                             [&](const DeviceClaim& c) { return workers_.HasRoomFor(c, 1); });
    if (room == claims.end() || !workers_.MayStart(now)) continue;
    bool cold = false;
    if (!StartWorkers(now, 1, d.rec.org_id, dep_id, &cold, dep_id, d.scope, d.run, *room)) continue;
    // The calls waiting now wait for this start: they report a cold start.
    for (auto& c : d.waiting) c->cold = true;
    changed = true;
  }
  return changed;
}

Status Runtime::AddDeployment(const DeploymentRecord& rec) {
  if (Status s = deployments_.Add(rec); !s.ok()) return s;
  // A pool that no longer gives its GPUs: it waits for them (logged).
  LiveDeployment* d = deployments_.Find(rec.id);
  if (Status s = TaskDevices(rec.request, Pool(), 1, &d->devices); !s.ok())
    LogFailure("deployment " + rec.name + " waits for GPUs this server lacks", s);
  return Status();
}

Result<DeploymentRecord> Runtime::CreateDeployment(DeploymentRecord d, bool* created) {
  std::lock_guard<std::mutex> lock(mu_);
  DeploymentTable::Caps caps;
  caps.max_per_org = opt_.max_deployments_per_org;
  caps.max_min_replicas = opt_.max_min_replicas_per_org >= 0 ? opt_.max_min_replicas_per_org : opt_.slots / 2;
  caps.slots = opt_.slots;
  if (Status s = deployments_.Admit(d, caps); !s.ok()) return s;
  // The scope is read before anything is written: an unreadable one creates nothing.
  if (auto scope = RecordedScope(d.target, "deployment " + d.id); !scope.ok()) return scope.status();
  auto rec = md_.CreateDeployment(std::move(d), created);
  if (!rec.ok()) return rec.status();
  if (*created) {
    if (Status s = AddDeployment(rec.value()); !s.ok()) return s;
  }
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
  for (auto& call : deployments_.Remove(d.id)) {
    call->Finish();
    call->error = Status(Code::kNotFound, "deployment " + d.name + " was deleted", "model");
  }
  for (auto& [id, w] : workers_) {
    if (w.rec.deployment == d.id && w.rec.state != WorkerState::kStopping)
      StopWorker(w, "deployment deleted", 5000);
  }
  cv_.notify_all();
  return d;
}

Json Runtime::DeploymentState(const std::string& id, BillingScope scope) {
  std::lock_guard<std::mutex> lock(mu_);
  const int64_t now = clock_.NowMs();
  Json replicas = Json::array();
  int64_t busy = 0;
  double open_s = 0, open_cost = 0;
  for (const auto& [wid, w] : workers_) {
    if (w.rec.deployment != id) continue;
    replicas.push_back({{"worker", wid},
                        {"device", w.rec.device},
                        {"state", ToString(w.rec.state)},
                        {"ready", w.ready},
                        {"since", w.rec.since_ms / 1000},
                        {"requested_at", w.rec.requested_ms / 1000}});
    busy += static_cast<int64_t>(w.calls.size());
    if (w.rec.seg_line == UsageLine::kDeployment && w.rec.seg_job == id) {
      const double seconds = static_cast<double>(std::max<int64_t>(0, now - w.rec.seg_start_ms)) / 1000.0;
      open_s += seconds;
      open_cost += seconds * meter_.PricePerSecond(w.rec);
    }
  }
  const LiveDeployment* d = deployments_.Find(id);
  return {{"replicas", replicas},
          {"busy", busy},
          {"waiting", d == nullptr ? 0 : static_cast<int64_t>(d->waiting.size())},
          {"open_seconds", open_s},
          {"open_cost", scope == BillingScope::kServerless ? 0.0 : open_cost}};
}

}  // namespace burst
