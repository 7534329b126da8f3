// A gang on its own: the shape a spec asks for, the ranks of an attempt,
// the rendezvous address, and what each member is told.
#include "runtime/job_gang.h"

#include <gtest/gtest.h>

#include "runtime/job_queue.h"

namespace burst {
namespace {

TEST(JobGang, ShapeComesFromTheSpecAndMustFitTheSlots) {
  const JobGang one = JobGang::FromSpec(Json::object(), "c10d");
  EXPECT_EQ(one.size(), 1);
  EXPECT_EQ(one.communication(), "c10d") << "\"auto\" is the server's choice";
  EXPECT_TRUE(one.FitsIn(0).ok()) << "one worker may wait for a slot";

  const JobGang four = JobGang::FromSpec(Json{{"workers", 4}, {"communication", "auto"}}, "store");
  EXPECT_EQ(four.size(), 4);
  EXPECT_EQ(four.communication(), "store");
  EXPECT_TRUE(four.FitsIn(4).ok());
  const Status over = four.FitsIn(3);
  EXPECT_EQ(over.code(), Code::kInvalidArgument);
  EXPECT_EQ(over.param(), "workers");
  EXPECT_NE(over.message().find("at most 3 workers"), std::string::npos) << over.message();
  EXPECT_EQ(JobGang::FromSpec(Json{{"workers", 2}, {"communication", "c10d"}}, "store").communication(),
            "c10d");
}

TEST(JobGang, AnAttemptsRanksLeasesAndDeliveriesBelongToItsTask) {
  JobTask t;
  t.gang = JobGang(3, "c10d");
  t.worker = "wrk-0";
  t.lease_until_ms = 100;
  t.gang.Form({"wrk-1", "wrk-2"}, 200);
  EXPECT_EQ(t.RankOf("wrk-0"), 0);
  EXPECT_EQ(t.RankOf("wrk-2"), 2);
  EXPECT_EQ(t.RankOf("wrk-9"), -1);
  EXPECT_EQ(t.WorkerIds(), (std::vector<std::string>{"wrk-0", "wrk-1", "wrk-2"}));
  EXPECT_EQ(t.LeaseOf(0), 100);
  EXPECT_EQ(t.LeaseOf(2), 200);
  t.LeaseOf(1) = 300;
  EXPECT_EQ(t.gang.member(1).lease_until_ms, 300);

  EXPECT_FALSE(t.AnyDelivered());
  t.DeliveredOf(2) = true;
  EXPECT_TRUE(t.AnyDelivered()) << "one member holding the task is enough to need it stopped";

  EXPECT_TRUE(t.OnAttempt(1));
  t.gang.member(1).finished = true;
  EXPECT_FALSE(t.OnAttempt(1)) << "a member that reported its end";
  EXPECT_EQ(t.RankOf("wrk-1"), 1) << "still holds its rank";
  EXPECT_TRUE(t.OnAttempt(0));
  EXPECT_FALSE(t.OnAttempt(-1));

  t.gang.Form({"wrk-3", "wrk-4"}, 400);  // the next attempt
  EXPECT_EQ(t.RankOf("wrk-1"), -1);
  EXPECT_FALSE(t.gang.AnyDelivered());
}

TEST(JobGang, RendezvousIsPublishedOncePerAttemptAndBounded) {
  JobGang g(2, "c10d");
  g.Form({"wrk-1"}, 0);
  bool changed = false;
  ASSERT_TRUE(g.Publish("10.0.0.1:29500", &changed).ok());
  EXPECT_TRUE(changed);
  ASSERT_TRUE(g.Publish("10.0.0.1:29500", &changed).ok());
  EXPECT_FALSE(changed) << "the same address again is no news";
  const Status big = g.Publish(std::string(257, 'a'), &changed);
  EXPECT_EQ(big.param(), "address");
  EXPECT_EQ(g.rendezvous(), "10.0.0.1:29500") << "a refused address leaves the one held";
  g.Form({"wrk-2"}, 0);
  EXPECT_EQ(g.rendezvous(), "") << "a new attempt waits for its own rank 0";
}

TEST(JobGang, EachMemberIsToldItsRankAndTheAttemptsOwnChannel) {
  const JobGang g(4, "store");
  const Json m = g.MemberJson(2, "orgs/o/jobs/j/", 3, 120'000, 5);
  EXPECT_EQ(m.at("rank"), 2);
  EXPECT_EQ(m.at("size"), 4);
  EXPECT_EQ(m.at("communication"), "store");
  EXPECT_EQ(m.at("channel"), "orgs/o/jobs/j/channel/attempt-3/");
  EXPECT_DOUBLE_EQ(m.at("timeout_s").get<double>(), 120.0);
  EXPECT_EQ(m.at("average_every"), 5);
}

}  // namespace
}  // namespace burst
