#include "runtime/worker_pool.h"

#include <algorithm>

namespace burst {

std::vector<int64_t> WorkerPool::FreeSlots(size_t count) const {
  std::vector<bool> used(static_cast<size_t>(std::max(slots_, 0)), false);
  for (const auto& [id, w] : live_)
    if (w.rec.slot >= 0 && w.rec.slot < slots_) used[static_cast<size_t>(w.rec.slot)] = true;
  std::vector<int64_t> free;
  for (int64_t slot = 0; slot < slots_ && free.size() < count; ++slot)
    if (!used[static_cast<size_t>(slot)]) free.push_back(slot);
  return free;
}

int64_t WorkerPool::StartFailed(int64_t now) {
  ++start_failures_;
  no_start_before_ms_ = now + std::min<int64_t>(60'000, 500LL << std::min<int64_t>(start_failures_ - 1, 7));
  return no_start_before_ms_;
}

PoolWorker* WorkerPool::PickIdle(const std::string& model, const BlasFacts& blas) {
  PoolWorker* pick = nullptr;
  int pick_score = -1;
  for (auto& [id, w] : live_) {
    if (!w.rec.deployment.empty() || w.rec.state != WorkerState::kIdle) continue;
    const int score = (blas.known() && w.blas == blas ? 2 : 0) + (w.rec.model == model ? 1 : 0);
    if (score > pick_score) {
      pick = &w;
      pick_score = score;
    }
  }
  return pick;
}

std::vector<PoolWorker*> WorkerPool::IdleFor(const std::string& model) {
  std::vector<PoolWorker*> warm, cold;
  for (auto& [id, w] : live_) {
    if (!w.rec.deployment.empty() || w.rec.state != WorkerState::kIdle) continue;
    (w.rec.model == model ? warm : cold).push_back(&w);
  }
  warm.insert(warm.end(), cold.begin(), cold.end());
  return warm;
}

int WorkerPool::Starting() const {
  int n = 0;
  for (const auto& [id, w] : live_) n += w.rec.deployment.empty() && w.rec.state == WorkerState::kStarting;
  return n;
}

PoolWorker& WorkerPool::Add(PoolWorker w) {
  const std::string id = w.rec.id;
  return live_[id] = std::move(w);
}

PoolWorker* WorkerPool::Find(const std::string& id) {
  auto it = live_.find(id);
  return it == live_.end() ? nullptr : &it->second;
}

}  // namespace burst
