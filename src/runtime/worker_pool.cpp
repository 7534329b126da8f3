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

PoolWorker& WorkerPool::Add(PoolWorker w) {
  const std::string id = w.rec.id;
  return live_[id] = std::move(w);
}

PoolWorker* WorkerPool::Find(const std::string& id) {
  auto it = live_.find(id);
  return it == live_.end() ? nullptr : &it->second;
}

}  // namespace burst
