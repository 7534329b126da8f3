#include "core/fair_pool.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <future>
#include <mutex>
#include <string>
#include <vector>

namespace burst {
namespace {

// A gate the tasks wait at until the test opens it.
struct Gate {
  std::mutex mu;
  std::condition_variable cv;
  bool open = false;
  int waiting = 0;
  void Wait() {
    std::unique_lock<std::mutex> lock(mu);
    ++waiting;
    cv.notify_all();
    cv.wait(lock, [&] { return open; });
  }
  void AwaitWaiting(int n) {
    std::unique_lock<std::mutex> lock(mu);
    cv.wait(lock, [&] { return waiting >= n; });
  }
  void Open() {
    std::lock_guard<std::mutex> lock(mu);
    open = true;
    cv.notify_all();
  }
};

TEST(FairPool, ATenantWithQueuedTasksDelaysAnotherByOneTaskAtMost) {
  FairPool pool(1, 0);
  Gate gate;
  std::mutex mu;
  std::vector<std::string> order;
  auto record = [&](std::string name) {
    std::lock_guard<std::mutex> lock(mu);
    order.push_back(std::move(name));
  };
  pool.Submit("a", [&] {
    gate.Wait();
    record("a1");
  });
  gate.AwaitWaiting(1);  // a1 holds the one thread
  for (const char* name : {"a2", "a3", "a4"}) pool.Submit("a", [&, name] { record(name); });
  pool.Submit("b", [&] { record("b1"); });
  gate.Open();
  pool.Shutdown();
  EXPECT_EQ(order, (std::vector<std::string>{"a1", "a2", "b1", "a3", "a4"}));
}

TEST(FairPool, ATenantNeverHoldsMoreThanItsCapAndOthersStillRun) {
  FairPool pool(8, 2);
  Gate gate;
  std::atomic<int> running_a{0}, peak_a{0};
  for (int i = 0; i < 6; ++i) {
    pool.Submit("a", [&] {
      const int now = ++running_a;
      int peak = peak_a.load();
      while (now > peak && !peak_a.compare_exchange_weak(peak, now)) {
      }
      gate.Wait();
      --running_a;
    });
  }
  std::promise<void> b_ran;
  pool.Submit("b", [&] { b_ran.set_value(); });
  // b's task runs while a's two hold their threads at the gate.
  EXPECT_EQ(b_ran.get_future().wait_for(std::chrono::seconds(30)), std::future_status::ready);
  gate.AwaitWaiting(2);
  EXPECT_EQ(pool.queued(), 4);
  gate.Open();
  pool.Shutdown();
  EXPECT_EQ(peak_a.load(), 2);
  EXPECT_EQ(pool.queued(), 0);
}

TEST(FairPool, ThreadsStartOnlyAsTasksNeedThem) {
  FairPool pool(16, 0);
  std::promise<void> done;
  pool.Submit("a", [&] { done.set_value(); });
  done.get_future().wait();
  pool.Shutdown();
  EXPECT_EQ(pool.threads_started(), 1);
}

TEST(FairPool, ShutdownRunsWhatIsQueued) {
  std::atomic<int> ran{0};
  {
    FairPool pool(1, 1);
    for (int i = 0; i < 20; ++i) pool.Submit(i % 2 ? "a" : "b", [&] { ++ran; });
  }
  EXPECT_EQ(ran.load(), 20);
}

}  // namespace
}  // namespace burst
