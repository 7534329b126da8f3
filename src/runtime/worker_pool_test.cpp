// The pool on its own: the slots new workers take, and the start back-off.
#include "runtime/worker_pool.h"

#include <gtest/gtest.h>

namespace burst {
namespace {

PoolWorker On(const std::string& id, int64_t slot) {
  PoolWorker w;
  w.rec.id = id;
  w.rec.slot = slot;
  return w;
}

TEST(WorkerPool, NewWorkersTakeTheLowestFreeSlots) {
  WorkerPool pool(4);
  EXPECT_EQ(pool.FreeSlots(2), (std::vector<int64_t>{0, 1}));
  pool.Add(On("wrk-a", 0));
  pool.Add(On("wrk-c", 2));
  EXPECT_EQ(pool.FreeSlots(1), (std::vector<int64_t>{1}));
  EXPECT_EQ(pool.FreeSlots(5), (std::vector<int64_t>{1, 3})) << "no more than there are";
  EXPECT_TRUE(pool.HasRoomFor(2));
  EXPECT_FALSE(pool.HasRoomFor(3));
  pool.Add(On("wrk-b", 1));
  pool.Add(On("wrk-d", 3));
  EXPECT_FALSE(pool.HasRoomFor());
  EXPECT_TRUE(pool.FreeSlots(1).empty());
  pool.erase(pool.find("wrk-c"));
  EXPECT_EQ(pool.FreeSlots(1), (std::vector<int64_t>{2})) << "an exited worker's slot is free again";
  EXPECT_EQ(pool.Find("wrk-c"), nullptr);
  ASSERT_NE(pool.Find("wrk-d"), nullptr);
  EXPECT_EQ(pool.Find("wrk-d")->rec.slot, 3);
}

TEST(WorkerPool, FailedStartsBackOffDoublingUpToAMinuteUntilOneWorks) {
  WorkerPool pool(1);
  EXPECT_TRUE(pool.MayStart(0));
  EXPECT_EQ(pool.StartFailed(1000), 1500);
  EXPECT_FALSE(pool.MayStart(1499));
  EXPECT_TRUE(pool.MayStart(1500));
  EXPECT_EQ(pool.StartFailed(2000), 3000);
  EXPECT_EQ(pool.StartFailed(3000), 5000);
  for (int i = 0; i < 10; ++i) pool.StartFailed(10'000);
  EXPECT_EQ(pool.StartFailed(10'000), 70'000) << "at most 60 s";
  pool.StartWorked();
  EXPECT_EQ(pool.StartFailed(100'000), 100'500) << "a worker that registered starts the count again";
}

}  // namespace
}  // namespace burst
