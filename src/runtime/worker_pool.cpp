#include "runtime/worker_pool.h"

#include <algorithm>
#include <set>

namespace burst {

bool WorkerPool::HasRoomFor(size_t count) const {
  size_t cpu = 0;
  for (const auto& [id, w] : live_) cpu += w.on_cpu();
  return cpu + count <= static_cast<size_t>(std::max(slots_, 0));
}

bool WorkerPool::HasRoomFor(const DeviceClaim& claim, size_t count) const {
  if (!claim.gpu()) return HasRoomFor(count);
  const size_t need = count * static_cast<size_t>(claim.count);
  return FreeGpus(claim.type, need).size() == need;
}

std::vector<GpuSlot> WorkerPool::FreeGpus(const std::string& type, size_t count) const {
  std::set<int64_t> held;
  for (const auto& [id, w] : live_)
    if (w.rec.device == type) held.insert(w.rec.gpus.begin(), w.rec.gpus.end());
  std::vector<GpuSlot> free;
  for (const GpuSlot& g : gpus_)
    if (g.type == type && !held.count(g.index) && free.size() < count) free.push_back(g);
  return free;
}

std::vector<int64_t> WorkerPool::FreeSlots(size_t count) const {
  std::vector<bool> used(static_cast<size_t>(std::max(slots_, 0)), false);
  for (const auto& [id, w] : live_)
    if (w.on_cpu() && w.rec.slot >= 0 && w.rec.slot < slots_) used[static_cast<size_t>(w.rec.slot)] = true;
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

PoolWorker* WorkerPool::PickIdle(const std::string& model, const BlasFacts& blas, const DeviceClaim& claim) {
  PoolWorker* pick = nullptr;
  int pick_score = -1;
  for (auto& [id, w] : live_) {
    if (!w.rec.deployment.empty() || w.rec.state != WorkerState::kIdle || !(w.claim() == claim)) continue;
    const int score = (blas.known() && w.blas == blas ? 2 : 0) + (w.rec.model == model ? 1 : 0);
    if (score > pick_score) {
      pick = &w;
      pick_score = score;
    }
  }
  return pick;
}

std::vector<PoolWorker*> WorkerPool::IdleFor(const std::string& model, const DeviceClaim& claim) {
  std::vector<PoolWorker*> warm, cold;
  for (auto& [id, w] : live_) {
    if (!w.rec.deployment.empty() || w.rec.state != WorkerState::kIdle || !(w.claim() == claim)) continue;
    (w.rec.model == model ? warm : cold).push_back(&w);
  }
  warm.insert(warm.end(), cold.begin(), cold.end());
  return warm;
}

int WorkerPool::Starting(const DeviceClaim& claim) const {
  int n = 0;
  for (const auto& [id, w] : live_)
    n += w.claim() == claim && w.rec.deployment.empty() && w.rec.state == WorkerState::kStarting;
  return n;
}

int WorkerPool::StartingFor(const std::string& job_id) const {
  int n = 0;
  for (const auto& [id, w] : live_)
    n += !w.on_cpu() && w.rec.state == WorkerState::kStarting && w.rec.seg_job == job_id;
  return n;
}

WorkerPool::GpuUse WorkerPool::Use(const std::string& type) const {
  GpuUse u;
  for (const GpuSlot& g : gpus_) u.total += g.type == type;
  u.held = u.total - static_cast<int64_t>(FreeGpus(type, gpus_.size()).size());
  return u;
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
