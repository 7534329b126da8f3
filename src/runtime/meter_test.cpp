// The Meter on its own: segments that telescope, serverless work billed as
// tokens, replicas never idle, and a ledger write that fails losing nothing.
#include "runtime/meter.h"

#include <gtest/gtest.h>

#include <filesystem>

#include "core/fs.h"
#include "runtime/runtime_test_util.h"

namespace burst {
namespace {

double Sum(const std::vector<UsageRecord>& us, int64_t* ms) {
  double cost = 0;
  *ms = 0;
  for (const UsageRecord& u : us) {
    cost += u.cost;
    *ms += u.end_ms - u.start_ms;
  }
  return cost;
}

// A worker's record and usage on a Meter at $0.5 a slot-second; Switch
// writes nothing, so the database stays empty.
class MeterTest : public ::testing::Test {
 protected:
  MeterTest() { r.id = "wrk-1"; }
  std::unique_ptr<Metadata> md = Must(Metadata::Open(":memory:"));
  Meter meter{*md, 0.5};
  WorkerRecord r;
  PendingUsage u;
};

TEST_F(MeterTest, SegmentsAddUpToTheWorkersLifetimeAndIdleTimeFollowsTheRunServedLast) {
  meter.Switch(r, u, 0, UsageLine::kStartup, "org-a", "job-1", BillingScope::kDedicated, "job-1");
  meter.Switch(r, u, 1000, UsageLine::kTraining, "org-a", "job-1", BillingScope::kDedicated, "job-1");
  meter.Switch(r, u, 5000, UsageLine::kIdle, "org-a", "");
  meter.Switch(r, u, 5000, UsageLine::kIdle, "org-a", "");  // no time passed: no empty segment
  meter.Switch(r, u, 7000, std::nullopt, "", "");
  ASSERT_EQ(u.closed.size(), 3u);
  EXPECT_EQ(u.closed[0].line, UsageLine::kStartup);
  EXPECT_EQ(u.closed[1].line, UsageLine::kTraining);
  EXPECT_EQ(u.closed[2].line, UsageLine::kIdle);
  EXPECT_EQ(u.closed[2].run_id, "job-1") << "idle time counts to the run served last";
  EXPECT_EQ(u.closed[1].start_ms, u.closed[0].end_ms);
  EXPECT_EQ(u.closed[2].start_ms, u.closed[1].end_ms);
  int64_t ms = 0;
  EXPECT_DOUBLE_EQ(Sum(u.closed, &ms), 7 * 0.5);
  EXPECT_EQ(ms, 7000);
  EXPECT_FALSE(r.seg_line.has_value()) << "exited: nothing open";
}

TEST_F(MeterTest, ServerlessWorkIsRecordedAtNoSlotCostAndBilledAsTokens) {
  meter.Switch(r, u, 0, UsageLine::kSampling, "org-a", "call-1", BillingScope::kServerless, "");
  meter.Switch(r, u, 2000, UsageLine::kIdle, "org-a", "");
  meter.Switch(r, u, 3000, UsageLine::kTraining, "org-a", "job-1", BillingScope::kDedicated, "job-1");
  meter.Switch(r, u, 4000, std::nullopt, "", "");
  ASSERT_EQ(u.closed.size(), 3u);
  EXPECT_EQ(u.closed[0].cost, 0.0);
  EXPECT_EQ(u.closed[1].scope, BillingScope::kServerless) << "idle time follows the scope served last";
  EXPECT_EQ(u.closed[1].cost, 0.0);
  EXPECT_DOUBLE_EQ(u.closed[2].cost, 0.5);

  Meter::Charge(u, 4000, UsageLine::kSampling, "org-a", "call-1", "", 0, 0.0);
  EXPECT_EQ(u.closed.size(), 3u) << "no tokens, no charge";
  Meter::Charge(u, 4000, UsageLine::kSampling, "org-a", "call-1", "", 120, 0.006);
  ASSERT_EQ(u.closed.size(), 4u);
  EXPECT_EQ(u.closed[3].tokens, 120);
  EXPECT_EQ(u.closed[3].start_ms, u.closed[3].end_ms) << "a charge takes no time";
  EXPECT_EQ(u.closed[3].scope, BillingScope::kServerless);
}

TEST_F(MeterTest, AReplicaStaysOnItsDeploymentWhenAskedToGoIdle) {
  r.deployment = "dep-1";
  meter.Switch(r, u, 0, UsageLine::kDeployment, "org-a", "dep-1", BillingScope::kDedicated, "");
  meter.Switch(r, u, 1000, UsageLine::kIdle, "org-a", "");
  EXPECT_TRUE(u.closed.empty());
  EXPECT_EQ(r.seg_line, UsageLine::kDeployment);
  meter.Switch(r, u, 3000, std::nullopt, "", "");
  ASSERT_EQ(u.closed.size(), 1u);
  EXPECT_EQ(u.closed[0].end_ms - u.closed[0].start_ms, 3000);
}

TEST(Meter, AFailedWriteKeepsTheSegmentsUntilOneSucceedsAndWritesThemOnce) {
  const std::filesystem::path dir = MakeTempDir("burst-meter-test");
  const std::string path = (dir / "meta.db").string();
  {
    auto md = Metadata::Open(path);
    ASSERT_TRUE(md.ok()) << md.status().ToString();
    auto org = md.value()->CreateOrg("a");
    ASSERT_TRUE(org.ok());
    Meter meter(*md.value(), 0.5);
    WorkerRecord r;
    r.id = "wrk-1";
    PendingUsage u;
    meter.Switch(r, u, 0, UsageLine::kStartup, org.value().id, "", BillingScope::kDedicated);
    meter.Switch(r, u, 2000, UsageLine::kIdle, org.value().id, "");

    WorkerWritesRefused refused(path);
    testing::internal::CaptureStderr();
    EXPECT_FALSE(meter.Save(r, u).ok());
    EXPECT_EQ(u.save_failures, 1);
    EXPECT_EQ(u.closed.size(), 1u) << "kept for the next try";
    meter.Switch(r, u, 3000, std::nullopt, "", "");
    r.state = WorkerState::kExited;
    meter.SaveExited(r, std::move(u));
    meter.RetryExited();
    const std::string err = testing::internal::GetCapturedStderr();
    EXPECT_NE(err.find("cannot write worker wrk-1"), std::string::npos) << err;
    EXPECT_NE(err.find("disk full"), std::string::npos) << err;
    EXPECT_EQ(meter.ExitedBehind().records, 1u);
    EXPECT_EQ(meter.ExitedBehind().segments, 2u);
    EXPECT_TRUE(md.value()->WorkerUsage("wrk-1").value().empty());

    refused.Lift();
    testing::internal::CaptureStderr();
    meter.RetryExited();
    meter.RetryExited();  // nothing left: nothing written twice
    testing::internal::GetCapturedStderr();
    EXPECT_EQ(meter.ExitedBehind().records, 0u);
    auto segs = md.value()->WorkerUsage("wrk-1");
    ASSERT_TRUE(segs.ok());
    ASSERT_EQ(segs.value().size(), 2u);
    int64_t ms = 0;
    EXPECT_DOUBLE_EQ(Sum(segs.value(), &ms), 1.5);
    EXPECT_EQ(ms, 3000);
  }
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace burst
