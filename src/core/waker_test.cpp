#include "core/waker.h"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>

namespace burst {
namespace {

TEST(Waker, TheFirstWakeNotifiesOnceAndLaterOnesDoNothing) {
  Waker w;
  int notified = 0;
  w.Attach([&] { ++notified; });
  EXPECT_FALSE(w.woken());
  w.Wake();
  w.Wake();
  EXPECT_TRUE(w.woken());
  EXPECT_EQ(notified, 1);
}

TEST(Waker, AWakeBeforeAttachNotifiesAtAttach) {
  Waker w;
  w.Wake();
  int notified = 0;
  w.Attach([&] { ++notified; });
  EXPECT_EQ(notified, 1);
}

TEST(Waker, ADetachedSideIsNotNotified) {
  Waker w;
  int notified = 0;
  w.Attach([&] { ++notified; });
  w.Detach();
  w.Wake();
  EXPECT_TRUE(w.woken());
  EXPECT_EQ(notified, 0);
}

TEST(Waker, WakesFromManyThreadsNotifyOnce) {
  Waker w;
  std::atomic<int> notified{0};
  w.Attach([&] { ++notified; });
  std::vector<std::thread> threads;
  for (int i = 0; i < 8; ++i) threads.emplace_back([&] { w.Wake(); });
  for (auto& t : threads) t.join();
  EXPECT_EQ(notified.load(), 1);
}

}  // namespace
}  // namespace burst
