// FairPool: threads started as load needs them and shared fairly among
// tenants: the HTTP server's request threads (a tenant is an organisation,
// or a client address before its request is admitted) and the training-loop
// service's (an organisation).
//
// Submit never blocks. A task runs as soon as a thread is free and its
// tenant runs fewer than max_per_tenant tasks; otherwise it waits in its
// tenant's own queue. Free threads serve the tenants with waiting tasks in
// turn (round robin), so one tenant's thousand queued requests delay
// another's next request by at most one task per tenant ahead of it, and
// one tenant never holds more than max_per_tenant threads. Threads, once
// started, stay until Shutdown (a burst of requests should not pay thread
// start-up twice).
//
// Thread-safety: every method may be called from any thread.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

namespace burst {

class FairPool {
 public:
  // max_per_tenant < 1: no cap but max_threads.
  FairPool(int max_threads, int max_per_tenant);
  ~FairPool() { Shutdown(); }
  FairPool(const FairPool&) = delete;
  FairPool& operator=(const FairPool&) = delete;

  void Submit(const std::string& tenant, std::function<void()> task);
  // From inside one of this pool's tasks: the rest of the task runs as
  // `tenant` (counted against its cap instead of its first tenant's) when
  // `tenant` may run one more now without waiting behind anyone (room under
  // its cap, nothing queued); false (nothing changes) otherwise. Saves the
  // handoff of submitting the next step.
  bool Switch(const std::string& tenant);
  // Runs the tasks still queued, then joins every thread.
  void Shutdown();

  int64_t threads_started() const { return started_; }
  // Tasks waiting for a thread now, of all tenants.
  int64_t queued();

 private:
  struct Tenant {
    std::deque<std::function<void()>> tasks;
    int running = 0;
    bool in_ring = false;
  };
  // How many of t's tasks could start now.
  int64_t Eligible(const Tenant& t) const;
  // Puts t in the ring of tenants to serve when it has a task that may start.
  void Ring(const std::string& name, Tenant& t);
  void Loop();

  const int max_;
  const int per_tenant_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::unordered_map<std::string, Tenant> tenants_;  // GUARDED_BY(mu_)
  std::deque<std::string> ring_;                     // GUARDED_BY(mu_): tenants served in turn
  int64_t eligible_ = 0;                             // GUARDED_BY(mu_): tasks that may start now
  int64_t queued_ = 0;                               // GUARDED_BY(mu_)
  std::vector<std::thread> threads_;                 // GUARDED_BY(mu_)
  int idle_ = 0;                                     // GUARDED_BY(mu_): threads waiting for a task
  bool stop_ = false;                                // GUARDED_BY(mu_)
  std::atomic<int64_t> started_{0};
};

}  // namespace burst
