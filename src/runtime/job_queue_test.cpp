#include "runtime/job_queue.h"

#include <gtest/gtest.h>

namespace burst {
namespace {

JobTask NewTask(JobQueue& q, const std::string& org, const std::string& id, int64_t workers = 1) {
  JobTask t;
  t.job_id = id;
  t.org_id = org;
  t.gang = JobGang(workers, "c10d");
  t.seq = q.NextSeq();
  return t;
}

// Dispatches the next task as the scheduler does: out of its queue, running.
std::string Dispatch(JobQueue& q, int64_t now, int64_t* tick) {
  JobTask* t = q.Next(now);
  if (t == nullptr) return "";
  t->worker = "w";
  q.Unqueue(t->org_id, t->job_id);
  q.Started(*t, ++*tick);
  return t->job_id;
}

TEST(JobQueue, TheOrganisationWithFewerTasksRunningGoesFirst) {
  JobQueue q;
  int64_t tick = 0;
  for (const char* id : {"a1", "a2", "a3"}) q.Enqueue(NewTask(q, "a", id));
  for (const char* id : {"b1", "b2"}) q.Enqueue(NewTask(q, "b", id));
  // a has the oldest task; then b (none running) before a's second, and so on.
  EXPECT_EQ(Dispatch(q, 0, &tick), "a1");
  EXPECT_EQ(Dispatch(q, 0, &tick), "b1");
  EXPECT_EQ(Dispatch(q, 0, &tick), "a2");
  EXPECT_EQ(Dispatch(q, 0, &tick), "b2");
  EXPECT_EQ(Dispatch(q, 0, &tick), "a3");
  EXPECT_EQ(Dispatch(q, 0, &tick), "");
  EXPECT_EQ(q.Active("a"), 3);
  EXPECT_EQ(q.Active("b"), 2);
}

TEST(JobQueue, AmongEqualsTheOneServedLeastRecentlyGoesFirst) {
  JobQueue q;
  int64_t tick = 0;
  q.Enqueue(NewTask(q, "a", "a1"));
  EXPECT_EQ(Dispatch(q, 0, &tick), "a1");
  JobTask* a1 = q.Find("a1");
  ASSERT_NE(a1, nullptr);
  q.Stopped(*a1);  // a's attempt ended: neither organisation runs anything
  q.Erase("a1");
  q.Enqueue(NewTask(q, "a", "a2"));  // older than b's
  q.Enqueue(NewTask(q, "b", "b1"));
  EXPECT_EQ(Dispatch(q, 0, &tick), "b1") << "a was served last";
}

TEST(JobQueue, ATaskInBackoffWaitsAndDoesNotHoldBackItsOrganisationsNext) {
  JobQueue q;
  int64_t tick = 0;
  JobTask retried = NewTask(q, "a", "a1");
  retried.not_before_ms = 5000;
  q.Enqueue(std::move(retried));
  q.Enqueue(NewTask(q, "a", "a2"));
  EXPECT_EQ(Dispatch(q, 1000, &tick), "a2");
  EXPECT_EQ(Dispatch(q, 1000, &tick), "");
  EXPECT_EQ(Dispatch(q, 5000, &tick), "a1");
}

TEST(JobQueue, RequeuedTaskReplacesItsAttemptAndCountsStopAndStart) {
  JobQueue q;
  int64_t tick = 0;
  q.Enqueue(NewTask(q, "a", "a1", /*workers=*/2));
  EXPECT_EQ(q.WorkersAsked(), 2u);
  EXPECT_EQ(Dispatch(q, 0, &tick), "a1");
  EXPECT_EQ(q.WorkersAsked(), 0u);
  EXPECT_TRUE(q.IsRunning("a1"));
  EXPECT_EQ(q.RunningIds(), std::vector<std::string>{"a1"});
  JobTask again = *q.Find("a1");
  q.Stopped(again);
  again.seq = q.NextSeq();
  q.Enqueue(std::move(again));
  EXPECT_FALSE(q.IsRunning("a1"));
  EXPECT_EQ(q.Find("a1")->worker, "") << "a queued task has no worker";
  EXPECT_EQ(q.QueuedCount(), 1u);
  EXPECT_EQ(q.Active("a"), 1);
}

TEST(JobQueue, WorkersAskedCountsEachQueuedTaskOnceWithItsGang) {
  JobQueue q;
  int64_t tick = 0;
  q.Enqueue(NewTask(q, "a", "gang", 3));
  q.Enqueue(NewTask(q, "b", "one"));
  EXPECT_EQ(q.WorkersAsked(), 4u);
  EXPECT_EQ(Dispatch(q, 0, &tick), "gang");
  EXPECT_EQ(q.WorkersAsked(), 1u) << "a running task asks for nothing";
  JobTask again = *q.Find("gang");
  q.Stopped(again);
  q.Enqueue(again);  // its attempt was lost: queued again
  EXPECT_EQ(q.WorkersAsked(), 4u);
  q.Unqueue("b", "one");
  q.Unqueue("b", "one");  // not queued any more: nothing
  q.Erase("one");
  EXPECT_EQ(q.WorkersAsked(), 3u);
  q.Unqueue("a", "gang");
  EXPECT_EQ(q.WorkersAsked(), 0u);
  EXPECT_EQ(q.QueuedCount(), 0u);
}

TEST(JobQueue, AnAdoptedTaskCountsAsRunning) {
  JobQueue q;
  JobTask t = NewTask(q, "a", "a1");
  t.worker = "w-old";
  JobTask& kept = q.AdoptRunning(std::move(t));
  EXPECT_EQ(kept.worker, "w-old");
  EXPECT_TRUE(q.IsRunning("a1"));
  EXPECT_EQ(q.Active("a"), 1);
  EXPECT_EQ(q.QueuedCount(), 0u);
}

TEST(JobQueue, EachDeviceClassHasItsOwnQueueAndASkippedOneHidesNoOther) {
  JobQueue q;
  JobTask gpu = NewTask(q, "a", "a-gpu");
  gpu.devices = {DeviceClaim{"h100", 2}, DeviceClaim{"l40s", 1}};
  EXPECT_EQ(gpu.DeviceClass(), "h100:2|l40s");
  q.Enqueue(gpu);
  q.Enqueue(NewTask(q, "a", "a-cpu"));
  EXPECT_EQ(q.Next(0)->job_id, "a-gpu") << "the oldest first, whatever its class";
  // Its class skipped (all its GPUs held): the CPU task behind it is next.
  EXPECT_EQ(q.Next(0, {"h100:2|l40s"})->job_id, "a-cpu");
  EXPECT_EQ(q.Next(0, {"h100:2|l40s", "cpu"}), nullptr);
  EXPECT_EQ(q.QueuedCount(), 2u);
  EXPECT_EQ(q.QueuedByOrg().at("a"), 2);
  EXPECT_EQ(q.Active("a"), 2);
  q.Unqueue("a", "a-gpu");
  EXPECT_EQ(q.QueuedCount(), 1u);
  EXPECT_EQ(q.Next(0)->job_id, "a-cpu");
}

}  // namespace
}  // namespace burst
