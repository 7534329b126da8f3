#include "core/fair_pool.h"

#include <algorithm>
#include <climits>

namespace burst {

FairPool::FairPool(int max_threads, int max_per_tenant)
    : max_(std::max(1, max_threads)), per_tenant_(max_per_tenant < 1 ? INT_MAX : max_per_tenant) {}

int64_t FairPool::Eligible(const Tenant& t) const {
  return std::min<int64_t>(static_cast<int64_t>(t.tasks.size()), std::max(0, per_tenant_ - t.running));
}

void FairPool::Ring(const std::string& name, Tenant& t) {
  if (!t.in_ring && Eligible(t) > 0) {
    t.in_ring = true;
    ring_.push_back(name);
  }
}

void FairPool::Submit(const std::string& tenant, std::function<void()> task) {
  std::lock_guard<std::mutex> lock(mu_);
  Tenant& t = tenants_[tenant];
  const int64_t before = Eligible(t);
  t.tasks.push_back(std::move(task));
  ++queued_;
  eligible_ += Eligible(t) - before;
  Ring(tenant, t);
  if (idle_ < eligible_ && static_cast<int>(threads_.size()) < max_ && !stop_) {
    ++idle_;  // counted from now: it takes a task as soon as it runs
    threads_.emplace_back([this] { Loop(); });
    ++started_;
  } else {
    cv_.notify_one();
  }
}

namespace {
// The tenant the task on this thread runs as (Loop sets it, Switch changes it).
thread_local std::string tl_tenant;
}  // namespace

bool FairPool::Switch(const std::string& tenant) {
  std::lock_guard<std::mutex> lock(mu_);
  if (tenant == tl_tenant) return true;
  auto from = tenants_.find(tl_tenant);
  if (from == tenants_.end()) return false;  // not one of this pool's tasks
  Tenant& to = tenants_[tenant];
  if (!to.tasks.empty() || to.running >= per_tenant_) {
    if (to.running == 0 && to.tasks.empty()) tenants_.erase(tenant);
    return false;
  }
  ++to.running;
  Tenant& was = from->second;
  const int64_t before = Eligible(was);
  --was.running;
  eligible_ += Eligible(was) - before;
  if (was.running == 0 && was.tasks.empty()) {
    tenants_.erase(from);
  } else {
    Ring(tl_tenant, was);
    if (Eligible(was) > 0) cv_.notify_one();
  }
  tl_tenant = tenant;
  return true;
}

void FairPool::Shutdown() {
  std::vector<std::thread> threads;
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
    threads.swap(threads_);
  }
  cv_.notify_all();
  for (std::thread& t : threads) t.join();
}

int64_t FairPool::queued() {
  std::lock_guard<std::mutex> lock(mu_);
  return queued_;
}

void FairPool::Loop() {
  std::unique_lock<std::mutex> lock(mu_);
  for (bool first = true;; first = false) {
    if (!first) ++idle_;  // a new thread was counted idle when it was started
    // Stopping, the threads drain what may still start; a tenant's tasks
    // held back by its cap start as its running ones end.
    cv_.wait(lock, [this] { return !ring_.empty() || (stop_ && queued_ == 0); });
    --idle_;
    if (ring_.empty()) return;  // stopping, nothing left
    tl_tenant = std::move(ring_.front());
    const std::string& name = tl_tenant;
    ring_.pop_front();
    Tenant& t = tenants_.at(name);
    t.in_ring = false;
    const int64_t before = Eligible(t);
    std::function<void()> task = std::move(t.tasks.front());
    t.tasks.pop_front();
    --queued_;
    ++t.running;
    eligible_ += Eligible(t) - before;
    Ring(name, t);  // its next task waits behind the other tenants'
    lock.unlock();
    task();
    task = nullptr;  // what it held goes before the lock is taken
    lock.lock();
    Tenant& after = tenants_.at(name);
    const int64_t was = Eligible(after);
    --after.running;
    eligible_ += Eligible(after) - was;
    if (after.running == 0 && after.tasks.empty()) {
      tenants_.erase(name);
    } else {
      Ring(name, after);
      if (Eligible(after) > 0) cv_.notify_one();
    }
  }
}

}  // namespace burst
