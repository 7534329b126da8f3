// Scheduler tests for one job on many workers (runtime_gangs.cpp): gang
// dispatch, the members' leases and reports, rendezvous, and how one
// member's loss or end reaches the others.
#include <gtest/gtest.h>

#include <thread>

#include "runtime/runtime_test_util.h"

namespace burst {
namespace {

class GangsTest : public RuntimeTest {
 protected:
  void SetUp() override {
    RuntimeTest::SetUp();
    opt_.slots = 3;
    Restart();
  }
  std::string SubmitGang(int64_t workers, const std::string& communication = "c10d") {
    return Submit(org_a_, "burst-small", {{"workers", workers}, {"communication", communication}});
  }
  // Registers every worker started so far; their ids in start order.
  std::vector<std::string> RegisterAll() {
    std::vector<std::string> ids;
    for (const WorkerLaunch& l : exec_.started) {
      EXPECT_TRUE(rt_->Register(l.worker_id, 0).ok());
      ids.push_back(l.worker_id);
    }
    return ids;
  }
};

TEST_F(GangsTest, NoMemberTrainsUntilAllHaveTheirLeaseAndEachGetsItsRank) {
  const std::string job = SubmitGang(2, "store");
  rt_->Tick();
  ASSERT_EQ(exec_.started.size(), 2u) << "a worker started for each member, no more";
  const std::string first = exec_.started[0].worker_id, second = exec_.started[1].worker_id;
  ASSERT_TRUE(rt_->Register(first, 0).ok());
  EXPECT_TRUE(Lease(first).is_null()) << "alone, it must not start the gang's work";
  EXPECT_EQ(Job(job).status, JobStatus::kQueued);
  ASSERT_TRUE(rt_->Register(second, 0).ok());
  Json a = Lease(first), b = Lease(second);
  ASSERT_EQ(a["job"], job);
  ASSERT_EQ(b["job"], job);
  EXPECT_EQ(a["attempt"], 1);
  std::set<int> ranks = {a["member"]["rank"].get<int>(), b["member"]["rank"].get<int>()};
  EXPECT_EQ(ranks, (std::set<int>{0, 1}));
  EXPECT_EQ(a["member"]["size"], 2);
  EXPECT_EQ(a["member"]["communication"], "store");
  EXPECT_EQ(a["member"]["channel"], b["member"]["channel"]);
  EXPECT_NE(a["member"]["channel"].get<std::string>().find("/channel/attempt-1/"), std::string::npos)
      << a.dump();
  EXPECT_EQ(Job(job).status, JobStatus::kRunning);
  EXPECT_EQ(Must(md_->ListAttempts(job)).size(), 1u) << "one attempt for the gang";
  ASSERT_EQ(exec_.groups, (std::vector<std::vector<std::string>>{{first, second}})) << "started together";
}

// A gang's missing workers start together (on Slurm, one allocation) and
// only once the slots are free for all of them: none holds a slot idle
// while the rest wait. An idle worker counts toward the gang.
TEST_F(GangsTest, AGangsMissingWorkersStartTogetherOnceThereAreSlotsForAll) {
  const std::string one = Submit(org_a_);
  rt_->Tick();
  ASSERT_EQ(exec_.started.size(), 1u);
  const std::string busy = exec_.started[0].worker_id;
  ASSERT_TRUE(rt_->Register(busy, 0).ok());
  ASSERT_EQ(Lease(busy)["job"], one);
  const std::string gang = SubmitGang(3);
  rt_->Tick();
  EXPECT_EQ(exec_.started.size(), 1u) << "two slots free, three workers missing: none starts";
  EXPECT_TRUE(exec_.groups.empty());
  // The busy worker comes free: it is one member, the two others start as one group.
  ASSERT_TRUE(rt_->Finish(busy, one, 1, "completed", Json(), false, 1, 1).ok());
  rt_->Tick();
  ASSERT_EQ(exec_.started.size(), 3u);
  ASSERT_EQ(exec_.groups.size(), 1u);
  EXPECT_EQ(exec_.groups[0],
            (std::vector<std::string>{exec_.started[1].worker_id, exec_.started[2].worker_id}));
  EXPECT_NE(exec_.started[1].slot, exec_.started[2].slot);
  bool told = false;
  for (const EventRecord& e : Must(md_->ListEvents(gang, "", 100, true)))
    told |= e.message.find("Starting workers " + exec_.started[1].worker_id) == 0 &&
            e.message.find(" together") != std::string::npos;
  EXPECT_TRUE(told) << "the job's events say the workers started together";
  RegisterAll();
  for (const std::string& w : {busy, exec_.started[1].worker_id, exec_.started[2].worker_id})
    EXPECT_EQ(Lease(w)["job"], gang) << w;
}

// A group the executor refuses starts none of its workers: the pool holds
// no half gang, the job stays queued, and the next try waits its backoff.
TEST_F(GangsTest, ARefusedGroupStartLeavesNoWorkerAndTheJobQueued) {
  exec_.fail_starts = true;
  const std::string job = SubmitGang(2);
  rt_->Tick();
  ASSERT_EQ(exec_.groups.size(), 1u);
  EXPECT_TRUE(exec_.started.empty());
  EXPECT_TRUE(rt_->WorkersJson(org_a_)["data"].empty()) << rt_->WorkersJson(org_a_).dump();
  EXPECT_EQ(Job(job).status, JobStatus::kQueued);
  rt_->Tick();
  EXPECT_EQ(exec_.groups.size(), 1u) << "no new try before the backoff";
  exec_.fail_starts = false;
  clock_.Advance(1000);
  rt_->Tick();
  ASSERT_EQ(exec_.groups.size(), 2u);
  EXPECT_EQ(exec_.started.size(), 2u);
}

TEST_F(GangsTest, MoreWorkersThanSlotsAreRefusedAndOneWorkerJobsStillRun) {
  JobRecord j;
  j.id = NewId("ftjob");
  j.org_id = org_a_;
  j.request_sha256 = j.id;
  j.spec = {{"model", "burst-small"}, {"workers", 4}};
  bool created = true;
  auto r = rt_->Submit(j, &created);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().param(), "workers");
  EXPECT_FALSE(created);
  EXPECT_FALSE(md_->GetJobById(j.id).ok()) << "a refused job creates nothing";
}

// Rank 0 of c10d publishes its address; the others get it, and only rank
// 0 may publish.
TEST_F(GangsTest, RendezvousPassesRankZerosAddressToTheOthers) {
  const std::string job = SubmitGang(2);
  rt_->Tick();
  std::vector<std::string> w = RegisterAll();
  Json a = Lease(w[0]), b = Lease(w[1]);
  const std::string r0 = a["member"]["rank"] == 0 ? w[0] : w[1], r1 = r0 == w[0] ? w[1] : w[0];
  EXPECT_EQ(Must(rt_->Rendezvous(r1, job, 1, "", 0)), "") << "not published yet";
  auto refused = rt_->Rendezvous(r1, job, 1, "10.0.0.2:1", 0);
  EXPECT_EQ(refused.status().param(), "address");
  std::string got;
  std::thread waiter([&] { got = Must(rt_->Rendezvous(r1, job, 1, "", 5000)); });
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_EQ(Must(rt_->Rendezvous(r0, job, 1, "10.0.0.1:29500", 0)), "10.0.0.1:29500");
  waiter.join();
  EXPECT_EQ(got, "10.0.0.1:29500");
  EXPECT_EQ(rt_->Rendezvous(r1, job, 2, "", 0).status().reason(), "lease_lost") << "another attempt's";
  // Only rank 0 writes checkpoints.
  EXPECT_FALSE(rt_->Checkpoint(r1, job, 1, 5, Json::object()).ok());
  EXPECT_TRUE(rt_->Checkpoint(r0, job, 1, 5, Json::object()).ok());
}

// A member whose lease lapses ends the attempt for the gang: the other
// member learns it (lease_lost), is drained back to idle by its next
// lease, and the job runs again on a fresh channel from its checkpoint.
TEST_F(GangsTest, AMembersLapsedLeaseRequeuesTheGangAndDrainsTheOther) {
  const std::string job = SubmitGang(2, "store");
  rt_->Tick();
  std::vector<std::string> w = RegisterAll();
  Json a = Lease(w[0]), b = Lease(w[1]);
  const std::string r0 = a["member"]["rank"] == 0 ? w[0] : w[1], r1 = r0 == w[0] ? w[1] : w[0];
  ASSERT_TRUE(rt_->Checkpoint(r0, job, 1, 5, Json::object()).ok());
  clock_.Advance(opt_.lease_ttl_ms / 2);
  ASSERT_TRUE(rt_->Heartbeat(r0, job, 1, 6).ok());
  clock_.Advance(opt_.lease_ttl_ms / 2 + 1);  // rank 1 never beat
  rt_->Tick();
  auto atts = Must(md_->ListAttempts(job));
  ASSERT_EQ(atts.size(), 1u);
  EXPECT_EQ(atts[0].outcome, AttemptOutcome::kLost);
  EXPECT_NE(atts[0].error.value("message", "").find("rank 1"), std::string::npos) << atts[0].error.dump();
  EXPECT_EQ(rt_->Heartbeat(r0, job, 1, 7).status().reason(), "lease_lost");
  EXPECT_EQ(Job(job).status, JobStatus::kQueued);
  EXPECT_EQ(Job(job).resume_step, 5);
  // Rank 0 drops the work and asks again: free, and with a third worker
  // started in rank 1's place, the gang runs again.
  clock_.Advance(60'000);  // past the retry's backoff
  Json none = Lease(r0);
  rt_->Tick();
  for (size_t i = 2; i < exec_.started.size(); ++i)
    ASSERT_TRUE(rt_->Register(exec_.started[i].worker_id, 0).ok());
  ASSERT_GE(exec_.started.size(), 3u);
  Json again = none.is_null() ? Lease(r0) : none;
  ASSERT_EQ(again["job"], job) << again.dump();
  EXPECT_EQ(again["attempt"], 2);
  EXPECT_EQ(again["resume_step"], 5);
  EXPECT_NE(again["member"]["channel"].get<std::string>().find("/channel/attempt-2/"), std::string::npos);
}

// Rank 1 may report its end first; the job ends with rank 0's report, and
// a member's report after the attempt ended frees it.
TEST_F(GangsTest, TheJobEndsWithRankZerosFinishAndEveryMemberIsFreed) {
  const std::string job = SubmitGang(2);
  rt_->Tick();
  std::vector<std::string> w = RegisterAll();
  Json a = Lease(w[0]), b = Lease(w[1]);
  const std::string r0 = a["member"]["rank"] == 0 ? w[0] : w[1], r1 = r0 == w[0] ? w[1] : w[0];
  ASSERT_TRUE(rt_->Finish(r1, job, 1, "completed", Json(), false, 7, 100).ok());
  EXPECT_EQ(Job(job).status, JobStatus::kRunning) << "rank 1's end is not the job's";
  EXPECT_EQ(rt_->Heartbeat(r1, job, 1, 7).status().reason(), "lease_lost") << "it is done with the attempt";
  ASSERT_TRUE(rt_->Finish(r0, job, 1, "completed", Json(), false, 7, 200).ok());
  EXPECT_EQ(Job(job).status, JobStatus::kSucceeded);
  EXPECT_EQ(Job(job).trained_tokens, 200);
  const Json pool = rt_->WorkersJson(org_a_);
  for (const Json& x : pool["data"]) EXPECT_EQ(x["state"], "idle") << pool.dump();

  // The other order: rank 0 ends the attempt, rank 1's late finish is taken.
  const std::string job2 = SubmitGang(2);
  Json c = Lease(w[0]), d = Lease(w[1]);
  const std::string s0 = c["member"]["rank"] == 0 ? w[0] : w[1], s1 = s0 == w[0] ? w[1] : w[0];
  ASSERT_TRUE(rt_->Finish(s0, job2, 1, "completed", Json(), false, 7, 200).ok());
  EXPECT_TRUE(rt_->Finish(s1, job2, 1, "completed", Json(), false, 7, 100).ok());
  const Json pool2 = rt_->WorkersJson(org_a_);
  for (const Json& x : pool2["data"]) EXPECT_EQ(x["state"], "idle") << pool2.dump();
}

// A member's failure fails the attempt for all (retried, costing a retry).
TEST_F(GangsTest, AMembersFailureEndsTheAttemptForTheGang) {
  const std::string job = SubmitGang(2);
  rt_->Tick();
  std::vector<std::string> w = RegisterAll();
  Json a = Lease(w[0]), b = Lease(w[1]);
  const std::string r1 = a["member"]["rank"] == 1 ? w[0] : w[1];
  Json err = {{"code", "unavailable"}, {"message", "rank 0 went away"}};
  ASSERT_TRUE(rt_->Finish(r1, job, 1, "failed", err, true, 3, 0).ok());
  auto atts = Must(md_->ListAttempts(job));
  ASSERT_EQ(atts.size(), 1u);
  EXPECT_EQ(atts[0].outcome, AttemptOutcome::kFailed);
  EXPECT_EQ(Job(job).status, JobStatus::kQueued);
  EXPECT_EQ(Job(job).retries, 1);
}

// A gang waiting for its slots is not overtaken by a smaller job behind
// it: the slot that frees is the gang's, or it would wait for ever.
TEST_F(GangsTest, AGangWaitingForSlotsIsNotOvertakenByASmallerJob) {
  const std::string first = Submit(org_a_);
  const std::string w = Register();
  ASSERT_EQ(Lease(w)["job"], first);
  const std::string gang = SubmitGang(3);
  const std::string small = Submit(org_a_);
  rt_->Tick();
  EXPECT_EQ(exec_.started.size(), 1u) << "two slots are free, but the gang needs three";
  EXPECT_EQ(Job(small).status, JobStatus::kQueued) << "the small job waits behind the gang";
  ASSERT_TRUE(rt_->Finish(w, first, 1, "completed", Json(), false, 7, 100).ok());
  rt_->Tick();
  ASSERT_EQ(exec_.started.size(), 3u) << "the gang's two missing workers start together";
  EXPECT_EQ(Lease(w)["job"], Json()) << "the idle worker waits for the gang's others";
  for (size_t i = 1; i < 3; ++i) ASSERT_TRUE(rt_->Register(exec_.started[i].worker_id, 0).ok());
  EXPECT_EQ(Lease(w)["job"], gang);
  EXPECT_EQ(Job(small).status, JobStatus::kQueued);
}

}  // namespace
}  // namespace burst
