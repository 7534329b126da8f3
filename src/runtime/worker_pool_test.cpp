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

PoolWorker Idle(const std::string& id, const std::string& model, const std::string& blas_name = "") {
  PoolWorker w = On(id, 0);
  w.rec.state = WorkerState::kIdle;
  w.rec.model = model;
  if (!blas_name.empty()) w.blas.kernels = blas_name;
  return w;
}

TEST(WorkerPool, ATaskGoesToItsCheckpointsBlasThenWarmThenAnyIdleWorker) {
  WorkerPool pool(8);
  EXPECT_EQ(pool.PickIdle("m", BlasFacts{}), nullptr) << "no idle worker";
  pool.Add(Idle("wrk-a", "other"));
  PoolWorker busy = Idle("wrk-b", "m");
  busy.rec.state = WorkerState::kBusy;
  pool.Add(busy);
  PoolWorker replica = Idle("wrk-c", "m");
  replica.rec.deployment = "dep-1";
  pool.Add(replica);
  ASSERT_NE(pool.PickIdle("m", BlasFacts{}), nullptr);
  EXPECT_EQ(pool.PickIdle("m", BlasFacts{})->rec.id, "wrk-a")
      << "busy workers and replicas are never weighed";
  pool.Add(Idle("wrk-d", "m"));
  EXPECT_EQ(pool.PickIdle("m", BlasFacts{})->rec.id, "wrk-d") << "warm first";
  pool.Add(Idle("wrk-e", "other", "openblas"));
  BlasFacts openblas;
  openblas.kernels = "openblas";
  EXPECT_EQ(pool.PickIdle("m", openblas)->rec.id, "wrk-e") << "the checkpoint's BLAS over warm";
  EXPECT_EQ(pool.PickIdle("m", BlasFacts{})->rec.id, "wrk-d") << "an unknown BLAS matches none";
  pool.Add(Idle("wrk-f", "m", "openblas"));
  EXPECT_EQ(pool.PickIdle("m", openblas)->rec.id, "wrk-f") << "both: the BLAS and warm";
}

TEST(WorkerPool, AGangTakesIdleWorkersWarmFirstAndCountsThoseStarting) {
  WorkerPool pool(8);
  pool.Add(Idle("wrk-a", "other"));
  pool.Add(Idle("wrk-b", "m"));
  pool.Add(Idle("wrk-c", "other"));
  pool.Add(Idle("wrk-d", "m"));
  PoolWorker starting = On("wrk-e", 4);
  starting.rec.state = WorkerState::kStarting;
  pool.Add(starting);
  PoolWorker replica = On("wrk-f", 5);
  replica.rec.state = WorkerState::kStarting;
  replica.rec.deployment = "dep-1";
  pool.Add(replica);
  std::vector<std::string> ids;
  for (const PoolWorker* w : pool.IdleFor("m")) ids.push_back(w->rec.id);
  EXPECT_EQ(ids, (std::vector<std::string>{"wrk-b", "wrk-d", "wrk-a", "wrk-c"}));
  EXPECT_EQ(pool.Starting(), 1) << "a replica starting is its deployment's";
}

}  // namespace
}  // namespace burst
