#include "runtime/deployment_table.h"

#include <algorithm>

#include "store/keys.h"

namespace burst {

int64_t LiveDeployment::ReplicasWanted(int64_t busy) const {
  const int64_t load = busy + static_cast<int64_t>(waiting.size());
  return std::clamp<int64_t>((load + max_concurrency - 1) / max_concurrency, min_replicas, max_replicas);
}

Status DeploymentTable::Admit(const DeploymentRecord& d, const Caps& caps) const {
  int live = 0;
  int64_t held = 0;  // slots the organisation's other deployments keep live
  for (const auto& [id, x] : live_) {
    if (x.rec.org_id != d.org_id) continue;
    if (x.rec.name == d.name) return Status();
    ++live;
    held += x.min_replicas;
  }
  if (caps.max_per_org > 0 && live >= caps.max_per_org) {
    return Status(Code::kResourceExhausted,
                  "your organisation has " + std::to_string(live) + " live deployments, its limit (" +
                      std::to_string(caps.max_per_org) + "); delete one first",
                  "max_deployments", "org_cap");
  }
  // Replicas held live are slots no one else can use: an organisation's
  // may not take them all.
  const int64_t min_replicas = d.request.value("min_replicas", int64_t{0});
  if (min_replicas > 0 && held + min_replicas > caps.max_min_replicas) {
    return Status(Code::kResourceExhausted,
                  "min_replicas " + std::to_string(min_replicas) + " would hold " +
                      std::to_string(held + min_replicas) + " of the pool's " + std::to_string(caps.slots) +
                      " slots live for your organisation's deployments; its limit is " +
                      std::to_string(caps.max_min_replicas) +
                      " (the server's --org-max-min-replicas; replicas beyond min_replicas start when called "
                      "and stop when idle)",
                  "min_replicas", "org_cap");
  }
  return Status();
}

Status DeploymentTable::Add(const DeploymentRecord& rec) {
  auto scope = RecordedScope(rec.target, "deployment " + rec.id);
  if (!scope.ok()) return scope.status();
  LiveDeployment d;
  d.rec = rec;
  d.min_replicas = rec.request.value("min_replicas", int64_t{0});
  d.max_replicas = std::max<int64_t>(1, rec.request.value("max_replicas", int64_t{1}));
  d.window_ms = static_cast<int64_t>(rec.request.value("scaledown_window_s", 60.0) * 1000);
  d.max_concurrency = std::max<int64_t>(1, rec.request.value("max_concurrency", int64_t{1}));
  d.scope = scope.value();
  // Spend on a checkpoint is its run's.
  d.run = JobOfKey(rec.target.value("checkpoint_prefix", ""));
  live_[rec.id] = std::move(d);
  return Status();
}

std::deque<std::shared_ptr<WorkerCall>> DeploymentTable::Remove(const std::string& id) {
  std::deque<std::shared_ptr<WorkerCall>> waiting;
  if (auto it = live_.find(id); it != live_.end()) {
    waiting = std::move(it->second.waiting);
    live_.erase(it);
  }
  return waiting;
}

LiveDeployment* DeploymentTable::Find(const std::string& id) {
  auto it = live_.find(id);
  return it == live_.end() ? nullptr : &it->second;
}

const LiveDeployment* DeploymentTable::Find(const std::string& id) const {
  auto it = live_.find(id);
  return it == live_.end() ? nullptr : &it->second;
}

size_t DeploymentTable::WaitingOf(const std::string& org) const {
  size_t n = 0;
  for (const auto& [id, d] : live_)
    for (const auto& c : d.waiting) n += c->org_id == org;
  return n;
}

void DeploymentTable::Unqueue(const std::shared_ptr<WorkerCall>& call) {
  LiveDeployment* d = Find(call->deployment);
  if (d == nullptr) return;
  if (auto p = std::find(d->waiting.begin(), d->waiting.end(), call); p != d->waiting.end())
    d->waiting.erase(p);
}

}  // namespace burst
