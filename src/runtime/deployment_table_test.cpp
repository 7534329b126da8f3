// The live deployments on their own: sizing read from the request, the
// replicas a load asks for, the organisations' caps, waiting calls.
#include "runtime/deployment_table.h"

#include <gtest/gtest.h>

namespace burst {
namespace {

DeploymentRecord Dep(const std::string& id, const std::string& org, const std::string& name, Json request) {
  DeploymentRecord d;
  d.id = id;
  d.org_id = org;
  d.name = name;
  d.request = std::move(request);
  d.target = {{"base_model", "burst-small"},
              {"checkpoint_prefix", "orgs/org-a/jobs/ftjob-abc/checkpoints/step-4/"}};
  return d;
}

std::shared_ptr<WorkerCall> Call(const std::string& id, const std::string& org, const std::string& dep) {
  auto c = std::make_shared<WorkerCall>();
  c->id = id;
  c->org_id = org;
  c->deployment = dep;
  return c;
}

TEST(DeploymentTable, ReadsItsSizingOnceAndAsksForReplicasByLoad) {
  DeploymentTable t;
  ASSERT_TRUE(t.Add(Dep("dep-1", "org-a", "chat",
                        {{"min_replicas", 1},
                         {"max_replicas", 3},
                         {"max_concurrency", 4},
                         {"scaledown_window_s", 2.5}}))
                  .ok());
  const LiveDeployment* d = t.Find("dep-1");
  ASSERT_NE(d, nullptr);
  EXPECT_EQ(d->window_ms, 2500);
  EXPECT_EQ(d->run, "ftjob-abc") << "spend on a checkpoint is its run's";
  EXPECT_EQ(d->ReplicasWanted(0), 1) << "never below min_replicas";
  EXPECT_EQ(d->ReplicasWanted(4), 1);
  EXPECT_EQ(d->ReplicasWanted(5), 2) << "4 calls a replica";
  EXPECT_EQ(d->ReplicasWanted(100), 3) << "never above max_replicas";
  t.Find("dep-1")->waiting.push_back(Call("c1", "org-a", "dep-1"));
  EXPECT_EQ(d->ReplicasWanted(4), 2) << "waiting calls count as load";

  ASSERT_TRUE(t.Add(Dep("dep-2", "org-a", "zero", {{"max_replicas", 0}, {"max_concurrency", 0}})).ok());
  EXPECT_EQ(t.Find("dep-2")->max_replicas, 1) << "at least one replica when called";
  EXPECT_EQ(t.Find("dep-2")->ReplicasWanted(3), 1);
  EXPECT_EQ(t.Find("dep-2")->ReplicasWanted(0), 0) << "scales to zero";
  EXPECT_EQ(t.Find("dep-9"), nullptr);
}

TEST(DeploymentTable, AnUnknownBillingScopeAddsNothing) {
  DeploymentTable t;
  DeploymentRecord d = Dep("dep-1", "org-a", "chat", Json::object());
  d.target["scope"] = "lunar";
  Status s = t.Add(d);
  EXPECT_EQ(s.code(), Code::kDataLoss) << s.ToString();
  EXPECT_EQ(t.Find("dep-1"), nullptr);
}

TEST(DeploymentTable, AdmitsWithinTheOrganisationsCapsAndAlwaysAReplayOfALiveName) {
  DeploymentTable t;
  DeploymentTable::Caps caps;
  caps.max_per_org = 2;
  caps.max_min_replicas = 2;
  caps.slots = 4;
  ASSERT_TRUE(t.Add(Dep("dep-1", "org-a", "one", {{"min_replicas", 1}})).ok());
  EXPECT_TRUE(t.Admit(Dep("", "org-a", "two", {{"min_replicas", 1}}), caps).ok());
  Status held = t.Admit(Dep("", "org-a", "two", {{"min_replicas", 2}}), caps);
  EXPECT_EQ(held.code(), Code::kResourceExhausted);
  EXPECT_EQ(held.param(), "min_replicas");
  EXPECT_NE(held.message().find("would hold 3 of the pool's 4 slots"), std::string::npos) << held.message();
  ASSERT_TRUE(t.Add(Dep("dep-2", "org-a", "two", Json::object())).ok());
  Status many = t.Admit(Dep("", "org-a", "three", Json::object()), caps);
  EXPECT_EQ(many.code(), Code::kResourceExhausted);
  EXPECT_EQ(many.param(), "max_deployments");
  EXPECT_TRUE(t.Admit(Dep("", "org-a", "two", {{"min_replicas", 2}}), caps).ok())
      << "a live name is answered elsewhere (the deployment itself, or a conflict)";
  EXPECT_TRUE(t.Admit(Dep("", "org-b", "three", {{"min_replicas", 2}}), caps).ok())
      << "another organisation's share";
  caps.max_per_org = 0;
  EXPECT_TRUE(t.Admit(Dep("", "org-a", "three", Json::object()), caps).ok()) << "0: no cap";
}

TEST(DeploymentTable, WaitingCallsAreCountedPerOrganisationAndLeaveWithTheirDeployment) {
  DeploymentTable t;
  ASSERT_TRUE(t.Add(Dep("dep-1", "org-a", "one", Json::object())).ok());
  ASSERT_TRUE(t.Add(Dep("dep-2", "org-b", "two", Json::object())).ok());
  auto a1 = Call("a1", "org-a", "dep-1"), a2 = Call("a2", "org-a", "dep-2"),
       b1 = Call("b1", "org-b", "dep-2");
  t.Find("dep-1")->waiting.push_back(a1);
  t.Find("dep-2")->waiting.push_back(a2);
  t.Find("dep-2")->waiting.push_back(b1);
  EXPECT_EQ(t.WaitingOf("org-a"), 2u);
  EXPECT_EQ(t.WaitingOf("org-b"), 1u);
  t.Unqueue(a2);
  t.Unqueue(a2);  // gone already: nothing
  EXPECT_EQ(t.WaitingOf("org-a"), 1u);
  auto left = t.Remove("dep-2");
  ASSERT_EQ(left.size(), 1u);
  EXPECT_EQ(left.front(), b1);
  EXPECT_EQ(t.Find("dep-2"), nullptr);
  EXPECT_TRUE(t.Remove("dep-2").empty());
  int n = 0;
  for (const auto& [id, d] : t) n += id == "dep-1";
  EXPECT_EQ(n, 1);
}

}  // namespace
}  // namespace burst
