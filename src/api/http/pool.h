// Pool: the threads that run requests, started as load needs them.
//
// Submit never blocks: a task waits in the queue when every thread is busy
// and max_threads are running. Threads, once started, stay until Shutdown
// (a burst of long polls should not pay thread start-up twice).
//
// Thread-safety: every method may be called from any thread.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace burst::http {

class Pool {
 public:
  explicit Pool(int max_threads) : max_(max_threads < 1 ? 1 : max_threads) {}
  ~Pool() { Shutdown(); }
  Pool(const Pool&) = delete;
  Pool& operator=(const Pool&) = delete;

  void Submit(std::function<void()> task) {
    std::lock_guard<std::mutex> lock(mu_);
    tasks_.push_back(std::move(task));
    if (idle_ < static_cast<int>(tasks_.size()) && static_cast<int>(threads_.size()) < max_ && !stop_) {
      threads_.emplace_back([this] { Loop(); });
      ++started_;
    } else {
      cv_.notify_one();
    }
  }

  // Runs the tasks still queued, then joins every thread.
  void Shutdown() {
    std::vector<std::thread> threads;
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
      threads.swap(threads_);
    }
    cv_.notify_all();
    for (std::thread& t : threads) t.join();
  }

  int64_t threads_started() const { return started_; }

 private:
  void Loop() {
    std::unique_lock<std::mutex> lock(mu_);
    while (true) {
      ++idle_;
      cv_.wait(lock, [this] { return stop_ || !tasks_.empty(); });
      --idle_;
      if (tasks_.empty()) return;  // stopping, nothing left
      std::function<void()> task = std::move(tasks_.front());
      tasks_.pop_front();
      lock.unlock();
      task();
      lock.lock();
    }
  }

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> tasks_;  // GUARDED_BY(mu_)
  std::vector<std::thread> threads_;         // GUARDED_BY(mu_)
  int idle_ = 0;                             // threads waiting for a task; GUARDED_BY(mu_)
  const int max_;
  bool stop_ = false;  // GUARDED_BY(mu_)
  std::atomic<int64_t> started_{0};
};

}  // namespace burst::http
