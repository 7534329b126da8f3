#include "core/states.h"

#include <gtest/gtest.h>

#include <set>
#include <vector>

namespace burst {
namespace {

// Every value with the wire name docs/api.md gives it: a renamed or missing
// table entry fails here, not in a client.
template <typename E>
void ExpectNames(const std::vector<std::pair<E, std::string_view>>& expected) {
  ASSERT_EQ(expected.size(), StateNames<E>::kNames.size())
      << "a value was added: name it here and in docs/api.md";
  std::set<std::string_view> seen;
  for (const auto& [value, name] : expected) {
    EXPECT_EQ(ToString(value), name);
    auto back = FromString<E>(name);
    ASSERT_TRUE(back.ok()) << back.status().ToString();
    EXPECT_EQ(back.value(), value) << name << " reads back as another value";
    EXPECT_TRUE(seen.insert(name).second) << name << " names two values";
  }
}

TEST(States, JobStatusNamesRoundTrip) {
  ExpectNames<JobStatus>({{JobStatus::kValidatingFiles, "validating_files"},
                          {JobStatus::kQueued, "queued"},
                          {JobStatus::kRunning, "running"},
                          {JobStatus::kSucceeded, "succeeded"},
                          {JobStatus::kFailed, "failed"},
                          {JobStatus::kCancelled, "cancelled"},
                          {JobStatus::kPaused, "paused"}});
}

TEST(States, WorkerStateNamesRoundTrip) {
  ExpectNames<WorkerState>({{WorkerState::kStarting, "starting"},
                            {WorkerState::kIdle, "idle"},
                            {WorkerState::kBusy, "busy"},
                            {WorkerState::kStopping, "stopping"},
                            {WorkerState::kExited, "exited"}});
}

TEST(States, AttemptOutcomeNamesRoundTrip) {
  ExpectNames<AttemptOutcome>({{AttemptOutcome::kCompleted, "completed"},
                               {AttemptOutcome::kPreempted, "preempted"},
                               {AttemptOutcome::kLost, "lost"},
                               {AttemptOutcome::kTimeout, "timeout"},
                               {AttemptOutcome::kCancelled, "cancelled"},
                               {AttemptOutcome::kFailed, "failed"}});
}

TEST(States, UsageLineNamesRoundTrip) {
  ExpectNames<UsageLine>({{UsageLine::kStartup, "startup"},
                          {UsageLine::kTraining, "training"},
                          {UsageLine::kEvaluation, "evaluation"},
                          {UsageLine::kSampling, "sampling"},
                          {UsageLine::kDeployment, "deployment"},
                          {UsageLine::kIdle, "idle"},
                          {UsageLine::kBatch, "batch"}});
}

TEST(States, BillingScopeNamesRoundTrip) {
  ExpectNames<BillingScope>(
      {{BillingScope::kDedicated, "dedicated"}, {BillingScope::kServerless, "serverless"}});
}

TEST(States, TaskKindNamesRoundTrip) {
  ExpectNames<TaskKind>({{TaskKind::kTrain, "train"},
                         {TaskKind::kEval, "eval"},
                         {TaskKind::kSample, "sample"},
                         {TaskKind::kLoop, "loop"},
                         {TaskKind::kWarm, "warm"},
                         {TaskKind::kBatch, "batch"}});
}

TEST(States, AnUnknownNameIsAnErrorThatSaysWhatWasExpected) {
  auto bad = FromString<JobStatus>("finished");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), Code::kInvalidArgument);
  EXPECT_EQ(bad.status().message(),
            "unknown job status \"finished\" (expected one of: validating_files, queued, running, succeeded, "
            "failed, "
            "cancelled, paused)");
  // Names are exact: no case folding, no trimming, no empty default.
  EXPECT_FALSE(FromString<JobStatus>("Queued").ok());
  EXPECT_FALSE(FromString<WorkerState>("idle ").ok());
  EXPECT_FALSE(FromString<UsageLine>("").ok());
  EXPECT_FALSE(FromString<BillingScope>("Serverless").ok());
  EXPECT_FALSE(FromString<AttemptOutcome>("succeeded").ok()) << "a job status is not an attempt outcome";
  EXPECT_NE(FromString<WorkerState>("running").status().message().find("worker state"), std::string::npos);
}

TEST(States, Predicates) {
  for (JobStatus s : {JobStatus::kSucceeded, JobStatus::kFailed, JobStatus::kCancelled})
    EXPECT_TRUE(IsTerminal(s));
  for (JobStatus s : {JobStatus::kValidatingFiles, JobStatus::kQueued, JobStatus::kRunning}) {
    EXPECT_FALSE(IsTerminal(s));
  }
  for (WorkerState s :
       {WorkerState::kStarting, WorkerState::kIdle, WorkerState::kBusy, WorkerState::kStopping}) {
    EXPECT_TRUE(IsLive(s));
  }
  EXPECT_FALSE(IsLive(WorkerState::kExited));
  EXPECT_FALSE(IsWork(UsageLine::kIdle));
  for (UsageLine l : {UsageLine::kStartup, UsageLine::kTraining, UsageLine::kEvaluation, UsageLine::kSampling,
                      UsageLine::kDeployment}) {
    EXPECT_TRUE(IsWork(l));
  }
}

}  // namespace
}  // namespace burst
