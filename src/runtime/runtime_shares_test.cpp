// Scheduler tests for what one organisation may hold of the pool: its own
// share of the sampling queue, the order waiting calls are served in, the
// workers its calls may hold, and the slots its deployments keep live.
#include <gtest/gtest.h>

#include <thread>
#include <vector>

#include "runtime/runtime_test_util.h"

namespace burst {
namespace {

class SharesTest : public RuntimeTest {
 protected:
  // Sample() on a thread of its own (it waits for an answer); joined at the end.
  std::shared_ptr<WorkerCall> Start(std::shared_ptr<WorkerCall> call) {
    clients_.emplace_back([this, call] { rt_->Sample(call, 60'000); });
    return call;
  }
  void TearDown() override {
    // Calls on a worker end when it exits; calls still waiting give up.
    for (const WorkerLaunch& w : exec_.Started()) exec_.Exit(w.worker_id, "exit 1");
    rt_->Tick();
    clock_.Advance(120'000);
    for (auto& t : clients_) t.join();
    RuntimeTest::TearDown();
  }
  std::vector<std::thread> clients_;
};

// Another organisation's calls are not refused because one organisation
// filled the waiting queue: each has a share of its own.
TEST_F(SharesTest, EachOrganisationHasItsOwnShareOfTheSamplingQueue) {
  opt_.max_waiting_samples = 3;
  Restart();
  Submit(org_a_);  // the one slot trains a job: calls wait
  Lease(Register());
  for (int i = 0; i < 3; ++i) Start(Call(org_a_, "smpl-a" + std::to_string(i)));
  ASSERT_TRUE(WaitFor([&] { return clock_.waiting() == 3; }));
  auto over = rt_->Sample(Call(org_a_, "smpl-a3"), 60'000);
  EXPECT_EQ(over->error.reason(), "capacity") << "org A is past its share";
  auto b = Start(Call(org_b_, "smpl-b0"));
  ASSERT_TRUE(WaitFor([&] { return clock_.waiting() == 4; })) << "org B's call waits in its own share";
  EXPECT_FALSE(b->done) << b->error.ToString();
}

// A worker that frees up takes the call of the organisation holding the
// fewest workers, not the oldest call: org A's backlog does not hold back
// org B's next call.
TEST_F(SharesTest, AFreedWorkerServesTheOrganisationHoldingFewestWorkersFirst) {
  opt_.slots = 2;
  opt_.max_batch_calls = 1;
  opt_.max_sampling_workers_per_org = 0;
  Restart();
  const std::string j1 = Submit(org_a_);
  const std::string w1 = Register();
  Lease(w1);
  Submit(org_a_);  // the second slot trains a job of org A throughout
  Lease(Register());
  ASSERT_TRUE(rt_->Finish(w1, j1, 1, "completed", Json(), false, 1, 1).ok());
  auto a0 = rt_->Sample(Call(org_a_, "smpl-a0"), 10'000, /*until_started=*/true);
  ASSERT_EQ(a0->worker, w1);
  ASSERT_EQ(Lease(w1)["id"], "smpl-a0");
  auto a1 = Start(Call(org_a_, "smpl-a1"));
  auto a2 = Start(Call(org_a_, "smpl-a2"));
  ASSERT_TRUE(WaitFor([&] { return clock_.waiting() == 2; }));
  auto b0 = Start(Call(org_b_, "smpl-b0"));
  ASSERT_TRUE(WaitFor([&] { return clock_.waiting() == 3; }));
  ASSERT_TRUE(rt_->SampleResult(w1, "smpl-a0", Answer("x"), Json()).ok());
  EXPECT_EQ(b0->worker, w1) << "org B holds no worker: its call goes first";
  EXPECT_TRUE(a1->worker.empty() && a2->worker.empty());
}

// An organisation's calls hold at most its share of the pool's workers; the
// rest stay free for others. Its next calls wait (or join its batches).
TEST_F(SharesTest, OneOrganisationsCallsLeaveAWorkerForOthers) {
  opt_.slots = 2;
  opt_.max_batch_calls = 1;
  opt_.max_sampling_workers_per_org = 1;
  Restart();
  std::string w1 = Idle();
  auto seen = Call(org_b_, "smpl-b-seen");  // org B has asked for a call lately (one that ends at once)
  seen->deployment = "dep-deleted";
  EXPECT_EQ(rt_->Sample(seen, 0)->error.code(), Code::kNotFound);
  auto a0 = rt_->Sample(Call(org_a_, "smpl-a0"), 10'000, /*until_started=*/true);
  ASSERT_EQ(a0->worker, w1);
  const size_t started = exec_.StartedCount();
  auto a1 = Start(Call(org_a_, "smpl-a1"));
  ASSERT_TRUE(WaitFor([&] { return clock_.waiting() == 1; }));
  rt_->Tick();
  EXPECT_EQ(exec_.StartedCount(), started) << "org A is at its share: no worker is started for it";
  auto b0 = Start(Call(org_b_, "smpl-b0"));
  ASSERT_TRUE(WaitFor([&] { return exec_.StartedCount() == started + 1; }))
      << "org B's call gets the free slot";
  std::string w2 = Register();
  rt_->Tick();
  EXPECT_EQ(b0->worker, w2);
  EXPECT_TRUE(a1->worker.empty());
}

// An idle worker warm from one organisation's work is not taken by another
// organisation's call while a slot is free to start a worker for it.
TEST_F(SharesTest, AnIdleWorkerStaysWithItsOrganisationWhileASlotIsFree) {
  opt_.slots = 2;
  Restart();
  const std::string w1 = Idle();  // warm from org A's job
  const size_t started = exec_.StartedCount();
  auto b0 = Start(Call(org_b_, "smpl-b0"));
  ASSERT_TRUE(WaitFor([&] { return exec_.StartedCount() == started + 1; }))
      << "org B gets a worker of its own";
  EXPECT_TRUE(b0->worker.empty());
  auto a0 = rt_->Sample(Call(org_a_, "smpl-a0"), 10'000, /*until_started=*/true);
  EXPECT_EQ(a0->worker, w1) << "org A's call finds its warm worker";
  const std::string w2 = Register();
  rt_->Tick();
  EXPECT_EQ(b0->worker, w2);
}

// A server one organisation uses alone keeps every worker for its calls;
// the share holds once another organisation samples.
TEST_F(SharesTest, TheShareOfWorkersHoldsOnlyWhileAnotherOrganisationSamples) {
  opt_.slots = 2;
  opt_.max_batch_calls = 1;
  opt_.max_sampling_workers_per_org = 1;
  Restart();
  const std::string w1 = Idle();
  auto a0 = rt_->Sample(Call(org_a_, "smpl-a0"), 10'000, /*until_started=*/true);
  ASSERT_EQ(a0->worker, w1);
  const size_t started = exec_.StartedCount();
  auto a1 = Start(Call(org_a_, "smpl-a1"));
  ASSERT_TRUE(WaitFor([&] { return exec_.StartedCount() == started + 1; }))
      << "alone, org A may use the pool";
  Register();
  rt_->Tick();
  EXPECT_FALSE(a1->worker.empty());
}

// Deployments' min_replicas keep slots live: one organisation's may not
// hold every slot (by default half of them), and a replay of the same
// deployment is not counted twice.
TEST_F(SharesTest, DeploymentsOfOneOrganisationCannotReserveEverySlot) {
  opt_.slots = 4;
  Restart();
  bool created = false;
  auto all = rt_->CreateDeployment(Dep(org_a_, "all", {{"min_replicas", 3}, {"max_replicas", 3}}), &created);
  ASSERT_FALSE(all.ok());
  EXPECT_EQ(all.status().reason(), "org_cap");
  EXPECT_EQ(all.status().param(), "min_replicas");
  auto two = rt_->CreateDeployment(Dep(org_a_, "two", {{"min_replicas", 2}, {"max_replicas", 2}}), &created);
  ASSERT_TRUE(two.ok()) << two.status().ToString();
  DeploymentRecord again = Dep(org_a_, "two", {{"min_replicas", 2}, {"max_replicas", 2}});
  auto replay = rt_->CreateDeployment(again, &created);
  EXPECT_TRUE(replay.ok()) << "the same deployment again is not counted twice: "
                           << replay.status().ToString();
  auto more = rt_->CreateDeployment(Dep(org_a_, "more", {{"min_replicas", 1}}), &created);
  EXPECT_EQ(more.status().reason(), "org_cap") << "two of four slots held already";
  auto zero = rt_->CreateDeployment(Dep(org_a_, "zero", {{"min_replicas", 0}}), &created);
  EXPECT_TRUE(zero.ok()) << "a deployment that scales from zero holds nothing";
  auto other = rt_->CreateDeployment(Dep(org_b_, "b", {{"min_replicas", 1}}), &created);
  EXPECT_TRUE(other.ok()) << other.status().ToString();
}

}  // namespace
}  // namespace burst
