#include "runtime/sample_queue.h"

#include <gtest/gtest.h>

namespace burst {
namespace {

std::shared_ptr<WorkerCall> Call(const std::string& org, const std::string& id) {
  auto c = std::make_shared<WorkerCall>();
  c->org_id = org;
  c->id = id;
  return c;
}

std::vector<std::string> Ids(const std::vector<std::shared_ptr<WorkerCall>>& calls) {
  std::vector<std::string> out;
  for (const auto& c : calls) out.push_back(c->id);
  return out;
}

TEST(SampleQueue, TheOrganisationHoldingFewerWorkersGoesFirstThenArrival) {
  SampleQueue q;
  for (const char* id : {"a1", "a2"}) q.Push(Call("a", id));
  q.Push(Call("b", "b1"));
  auto held = [](const std::string& org) { return org == "a" ? 2 : 0; };
  EXPECT_EQ(Ids(q.FairOrder(held)), (std::vector<std::string>{"b1", "a1", "a2"}));
  auto none = [](const std::string&) { return 0; };
  EXPECT_EQ(Ids(q.FairOrder(none)), (std::vector<std::string>{"a1", "a2", "b1"}));
}

TEST(SampleQueue, AmongEqualsTheOneServedLeastRecentlyGoesFirst) {
  SampleQueue q;
  auto a1 = Call("a", "a1");
  q.Push(a1);
  q.Took(a1, 1);
  q.Push(Call("a", "a2"));
  q.Push(Call("b", "b1"));
  auto none = [](const std::string&) { return 0; };
  EXPECT_EQ(Ids(q.FairOrder(none)), (std::vector<std::string>{"b1", "a2"})) << "a was served last";
  EXPECT_EQ(q.WaitingOf("a"), 1u);
  EXPECT_EQ(q.WaitingOf("c"), 0u);
}

TEST(SampleQueue, ACallPutBackGoesFirstAndOneRemovedIsGone) {
  SampleQueue q;
  auto first = Call("a", "a1"), back = Call("a", "a0");
  q.Push(first);
  q.PushFront(back);
  auto none = [](const std::string&) { return 0; };
  EXPECT_EQ(Ids(q.FairOrder(none)), (std::vector<std::string>{"a0", "a1"}));
  EXPECT_TRUE(q.Remove(back));
  EXPECT_FALSE(q.Remove(back));
  EXPECT_EQ(q.TakeAll().size(), 1u);
  EXPECT_TRUE(q.calls().empty());
}

TEST(SampleQueue, SharesHoldWhileAnotherOrganisationAskedLately) {
  SampleQueue q;
  q.Asked("a", 0);
  EXPECT_FALSE(q.OtherAskedLately("a", 1000)) << "a alone";
  q.Asked("b", 1000);
  EXPECT_TRUE(q.OtherAskedLately("a", 2000));
  EXPECT_FALSE(q.OtherAskedLately("a", 1000 + SampleQueue::kShareWindowMs)) << "b's ask is old";
}

}  // namespace
}  // namespace burst
