// Every Metadata call round-trips on either backend (test_backend.h):
// jobs with their events, logs and checkpoints; workers and the usage sums;
// sweeps and deployments.
#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "db/metadata.h"
#include "db/test_backend.h"

namespace burst {
namespace {

JobRecord NewJob(const std::string& org, const std::string& id, const std::string& kind = "") {
  JobRecord j;
  j.id = id;
  j.org_id = org;
  j.request_sha256 = "sha-" + id;
  if (!kind.empty()) j.spec["kind"] = kind;
  return j;
}

std::vector<std::string> Ids(const std::vector<JobRecord>& jobs) {
  std::vector<std::string> out;
  for (const auto& j : jobs) out.push_back(j.id);
  return out;
}

// Every job call, on both backends.
TEST_P(MetadataTest, JobsTheirEventsLogsAndCheckpointsRoundTrip) {
  auto md = OpenMetadata(NewDatabase());
  const std::string org = OrDie(md->CreateOrg("acme")).id;
  bool created = false;
  JobRecord keyed = NewJob(org, "ftjob-k");
  keyed.idempotency_key = "key-1";
  std::vector<EventRecord> first(2);
  first[0].message = "created";
  first[1].message = "validated";
  first[1].data = Json{{"n", 1}};
  ASSERT_TRUE(md->CreateJob(keyed, &created, first).ok());
  EXPECT_TRUE(created);
  auto again = md->CreateJob(keyed, &created);  // a replay: the same job
  ASSERT_TRUE(again.ok());
  EXPECT_FALSE(created);
  EXPECT_EQ(again.value().id, "ftjob-k");
  keyed.request_sha256 = "another body";
  EXPECT_EQ(md->CreateJob(keyed, &created).status().code(), Code::kAlreadyExists);
  EXPECT_EQ(md->IdempotentReplay(org, "key-1", "another body").status().code(), Code::kAlreadyExists);
  EXPECT_FALSE(OrDie(md->IdempotentReplay(org, "key-2", "x")).has_value());
  for (const char* id : {"ftjob-1", "ftjob-2", "ftjob-3"})
    ASSERT_TRUE(md->CreateJob(NewJob(org, id), &created).ok());
  ASSERT_TRUE(md->CreateJob(NewJob(org, "ftjob-e", "eval"), &created).ok());
  EXPECT_EQ(md->CreateJob(NewJob(org, "ftjob-1"), &created).status().code(), Code::kAlreadyExists);

  // Lists: newest first, by kind, paged.
  EXPECT_EQ(Ids(OrDie(md->ListJobs(org, "", 10))),
            (std::vector<std::string>{"ftjob-3", "ftjob-2", "ftjob-1", "ftjob-k"}));
  EXPECT_EQ(Ids(OrDie(md->ListJobs(org, "ftjob-2", 1))), std::vector<std::string>{"ftjob-1"});
  EXPECT_EQ(Ids(OrDie(md->ListJobs(org, "", 10, TaskKind::kEval))), std::vector<std::string>{"ftjob-e"});
  EXPECT_TRUE(OrDie(md->ListJobs("org-other", "", 10)).empty());

  // Progress fields round-trip, doubles and JSON included.
  JobRecord j = OrDie(md->GetJobById("ftjob-1"));
  j.status = JobStatus::kRunning;
  j.started_at = 1700000001;
  j.attempts = 2;
  j.retries = 1;
  j.not_before_ms = 1700000001234;
  j.step = 7;
  j.total_steps = 9;
  j.trained_tokens = 1234567;
  j.resume_step = 5;
  j.run_seconds = 12.375;
  j.fine_tuned_model = "ft:burst-small:acme:x";
  j.error = Json{{"code", "internal"}, {"message", "it's \"quoted\""}};
  j.result = Json{{"final", {{"loss", 0.5}}}};
  ASSERT_TRUE(md->UpdateJob(j).ok());
  const JobRecord back = OrDie(md->GetJob(org, "ftjob-1"));
  EXPECT_EQ(back.status, JobStatus::kRunning);
  EXPECT_EQ(back.not_before_ms, 1700000001234);
  EXPECT_EQ(back.trained_tokens, 1234567);
  EXPECT_EQ(back.run_seconds, 12.375);
  EXPECT_EQ(back.fine_tuned_model, j.fine_tuned_model);
  EXPECT_EQ(back.error, j.error);
  EXPECT_EQ(back.result, j.result);
  EXPECT_EQ(md->GetJob("org-other", "ftjob-1").status().code(), Code::kNotFound);
  EXPECT_EQ(md->UpdateJob(NewJob(org, "ftjob-none")).code(), Code::kNotFound);

  // Events: the first two, then more; ascending and descending pages.
  std::vector<EventRecord> more(3);
  for (size_t i = 0; i < more.size(); ++i) {
    more[i].job_id = "ftjob-k";
    more[i].message = "m" + std::to_string(i);
  }
  ASSERT_TRUE(md->AddEvents(more).ok());
  auto asc = OrDie(md->ListEvents("ftjob-k", "", 10, true));
  ASSERT_EQ(asc.size(), 5u);
  EXPECT_EQ(asc[0].message, "created");
  EXPECT_EQ(asc[1].data, (Json{{"n", 1}}));
  EXPECT_EQ(asc[4].message, "m2");
  const std::string after = "ftevent-" + std::to_string(asc[1].seq);
  auto next = OrDie(md->ListEvents("ftjob-k", after, 2, true));
  ASSERT_EQ(next.size(), 2u);
  EXPECT_EQ(next[0].message, "m0");
  auto desc = OrDie(md->ListEvents("ftjob-k", "ftevent-" + std::to_string(asc[4].seq), 2, false));
  ASSERT_EQ(desc.size(), 2u);
  EXPECT_EQ(desc[0].message, "m1");
  EXPECT_EQ(md->ListEvents("ftjob-k", "nonsense", 2, false).status().code(), Code::kInvalidArgument);

  // Logs, in order (more than one INSERT's worth), after a sequence number.
  std::vector<LogRecord> logs;
  for (int i = 0; i < 70; ++i) logs.push_back(LogRecord{0, "ftjob-k", 1, 0, "line " + std::to_string(i)});
  ASSERT_TRUE(md->AddLogs(logs).ok());
  auto all_logs = OrDie(md->ListLogs("ftjob-k", 0, 100));
  ASSERT_EQ(all_logs.size(), 70u);
  for (size_t i = 0; i < all_logs.size(); ++i) EXPECT_EQ(all_logs[i].text, "line " + std::to_string(i));
  auto later = OrDie(md->ListLogs("ftjob-k", all_logs[1].seq, 100));
  ASSERT_EQ(later.size(), 68u);
  EXPECT_EQ(later[0].text, "line 2");

  // Checkpoints: the same step again replaces its row.
  for (int64_t step : {2, 4, 6}) {
    ASSERT_TRUE(md->AddCheckpoint(CheckpointRecord{"ftjob-k", step, 0,
                                                   Json{{"loss", 1.0 / static_cast<double>(step)}},
                                                   "p" + std::to_string(step)})
                    .ok());
  }
  ASSERT_TRUE(md->AddCheckpoint(CheckpointRecord{"ftjob-k", 4, 0, Json{{"loss", 0.1}}, "p4-again"}).ok());
  auto cps = OrDie(md->ListCheckpoints("ftjob-k", 0, 10));
  ASSERT_EQ(cps.size(), 3u);
  EXPECT_EQ(cps[0].step, 6);
  EXPECT_EQ(cps[1].prefix, "p4-again");
  EXPECT_EQ(cps[1].metrics, (Json{{"loss", 0.1}}));
  auto before = OrDie(md->ListCheckpoints("ftjob-k", 6, 1));
  ASSERT_EQ(before.size(), 1u);
  EXPECT_EQ(before[0].step, 4);
  // Deleting one forgets that step only; again is a 404.
  ASSERT_TRUE(md->AddCheckpoint(CheckpointRecord{"ftjob-k", 8, 0, Json::object(), "p8"}).ok());
  ASSERT_TRUE(md->DeleteCheckpoint("ftjob-k", 8).ok());
  EXPECT_EQ(md->DeleteCheckpoint("ftjob-k", 8).code(), Code::kNotFound);
  EXPECT_EQ(md->DeleteCheckpoint("ftjob-other", 6).code(), Code::kNotFound);
  EXPECT_EQ(OrDie(md->ListCheckpoints("ftjob-k", 0, 10)).size(), 3u);

  // Across the organisation's fine-tuning jobs: newest job first, each job's
  // newest step first, with the base model; evaluations and other
  // organisations' jobs left out.
  JobRecord newer = NewJob(org, "ftjob-l");
  newer.spec["model"] = "burst-small";
  JobRecord theirs = NewJob(OrDie(md->CreateOrg("other")).id, "ftjob-o");
  for (const JobRecord& j : {newer, theirs}) ASSERT_TRUE(md->CreateJob(j, &created).ok());
  for (const char* job : {"ftjob-l", "ftjob-o", "ftjob-e"}) {  // ftjob-e: the evaluation above
    ASSERT_TRUE(md->AddCheckpoint(CheckpointRecord{job, 1, 0, Json::object(), "q"}).ok());
  }
  auto all = OrDie(md->ListOrgCheckpoints(org, 10));
  std::vector<std::string> names;
  for (const auto& c : all)
    names.push_back(c.checkpoint.job_id + ":" + std::to_string(c.checkpoint.step) + ":" + c.base_model);
  EXPECT_EQ(names,
            (std::vector<std::string>{"ftjob-l:1:burst-small", "ftjob-k:6:", "ftjob-k:4:", "ftjob-k:2:"}));
  EXPECT_EQ(OrDie(md->ListOrgCheckpoints(org, 2)).size(), 2u);
}

// The runtime's group commit: several jobs in one transaction, each with
// its own answer (created, the earlier job of its key, or its key's
// conflict, also against a job earlier in the same batch); a failed
// transaction writes none of them.
TEST_P(MetadataTest, JobsWrittenTogetherEachGetTheirOwnAnswer) {
  auto md = OpenMetadata(NewDatabase());
  const std::string org = OrDie(md->CreateOrg("acme")).id;
  bool created = false;
  JobRecord earlier = NewJob(org, "ftjob-earlier");
  earlier.idempotency_key = "key-a";
  ASSERT_TRUE(md->CreateJob(earlier, &created).ok());
  std::vector<Metadata::NewJob> batch(5);
  batch[0].job = NewJob(org, "ftjob-b0");
  batch[0].events.resize(1);
  batch[0].events[0].message = "created b0";
  batch[1].job = NewJob(org, "ftjob-b1");  // a replay of the earlier job
  batch[1].job.idempotency_key = "key-a";
  batch[1].job.request_sha256 = earlier.request_sha256;
  batch[2].job = NewJob(org, "ftjob-b2");  // the same key, another body
  batch[2].job.idempotency_key = "key-a";
  batch[3].job = NewJob(org, "ftjob-b3");  // a new key ...
  batch[3].job.idempotency_key = "key-b";
  batch[4].job = NewJob(org, "ftjob-b4");  // ... replayed in the same batch
  batch[4].job.idempotency_key = "key-b";
  batch[4].job.request_sha256 = batch[3].job.request_sha256;
  ASSERT_TRUE(md->CreateJobs(batch).ok());
  EXPECT_TRUE(batch[0].created);
  EXPECT_EQ(batch[0].result.value().id, "ftjob-b0");
  EXPECT_FALSE(batch[1].created);
  EXPECT_EQ(batch[1].result.value().id, "ftjob-earlier");
  EXPECT_FALSE(batch[2].created);
  EXPECT_EQ(batch[2].result.status().code(), Code::kAlreadyExists);
  EXPECT_TRUE(batch[3].created);
  EXPECT_FALSE(batch[4].created);
  EXPECT_EQ(batch[4].result.value().id, "ftjob-b3");
  EXPECT_EQ(Ids(OrDie(md->ListJobs(org, "", 10))),
            (std::vector<std::string>{"ftjob-b3", "ftjob-b0", "ftjob-earlier"}));
  EXPECT_EQ(OrDie(md->ListEvents("ftjob-b0", "", 10, true)).size(), 1u);

  // A duplicate id fails the transaction: neither job of the batch is written.
  std::vector<Metadata::NewJob> failing(2);
  failing[0].job = NewJob(org, "ftjob-c0");
  failing[1].job = NewJob(org, "ftjob-b0");
  EXPECT_EQ(md->CreateJobs(failing).code(), Code::kAlreadyExists);
  for (const auto& n : failing) {
    EXPECT_FALSE(n.created);
    EXPECT_FALSE(n.result.ok());
  }
  EXPECT_EQ(md->GetJobById("ftjob-c0").status().code(), Code::kNotFound);
}

// Calls from many threads at once (PostgreSQL: over the pool's connections)
// all land, and a key used by several of them at once makes one job.
TEST_P(MetadataTest, ConcurrentCallsAllLandAndAKeyMakesOneJob) {
  auto md = OpenMetadata(NewDatabase());
  const std::string org = OrDie(md->CreateOrg("acme")).id;
  std::vector<std::thread> threads;
  std::atomic<int> failures{0}, keyed_created{0};
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 20; ++i) {
        bool created = false;
        if (!md->CreateJob(NewJob(org, "ftjob-t" + std::to_string(t) + "-" + std::to_string(i)), &created)
                 .ok())
          ++failures;
        if (!md->GetOrg(org).ok()) ++failures;
      }
      JobRecord keyed = NewJob(org, "ftjob-keyed-" + std::to_string(t));
      keyed.idempotency_key = "shared-key";
      keyed.request_sha256 = "same body";
      bool created = false;
      auto r = md->CreateJob(keyed, &created);
      if (!r.ok()) ++failures;
      if (created) ++keyed_created;
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(keyed_created.load(), 1);
  EXPECT_EQ(OrDie(md->ListJobs(org, "", 1000)).size(), 8u * 20u + 1u);
}

TEST_P(MetadataTest, WorkersListInTheOrderFirstRecordedAndUsageSumsByUtcDay) {
  auto md = OpenMetadata(NewDatabase());
  const std::string org = OrDie(md->CreateOrg("acme")).id;
  for (const char* id : {"wrk-c", "wrk-a", "wrk-b"}) {
    WorkerRecord w;
    w.id = id;
    w.state = WorkerState::kIdle;
    ASSERT_TRUE(md->PutWorker(w).ok());
  }
  WorkerRecord c;
  c.id = "wrk-c";
  c.state = WorkerState::kExited;
  c.exit_reason = "done";
  // Closed segments: 2024-03-01 23:59:59 and 2024-03-02 00:00:00 UTC (one
  // second each), a token charge, and another run.
  const int64_t day2 = 1709337600000;  // 2024-03-02T00:00:00Z
  UsageRecord late{"wrk-c",     org,      "ftjob-1", UsageLine::kTraining,
                   day2 - 1000, day2,     0.25,      BillingScope::kDedicated,
                   0,           "ftjob-1"};
  UsageRecord early{"wrk-c", org,         "ftjob-1", UsageLine::kTraining,
                    day2,    day2 + 1000, 0.5,       BillingScope::kDedicated,
                    0,       "ftjob-1"};
  UsageRecord tokens{
      "", org, "ftjob-1", UsageLine::kSampling, day2, day2, 0.125, BillingScope::kServerless, 40, "ftjob-1"};
  UsageRecord other{
      "wrk-c", org, "", UsageLine::kIdle, day2 + 1000, day2 + 3000, 0.75, BillingScope::kDedicated, 0, ""};
  ASSERT_TRUE(md->PutWorker(c, {late, early, tokens, other}).ok());

  auto all = OrDie(md->ListWorkers(false));
  ASSERT_EQ(all.size(), 3u);
  EXPECT_EQ(all[0].id, "wrk-c");  // updated last, still first
  EXPECT_EQ(all[0].exit_reason, "done");
  EXPECT_EQ(all[1].id, "wrk-a");
  EXPECT_EQ(all[2].id, "wrk-b");
  auto live = OrDie(md->ListWorkers(true));
  ASSERT_EQ(live.size(), 2u);
  EXPECT_EQ(live[0].id, "wrk-a");

  auto sums = OrDie(md->SumUsage(org, 0, 0));
  ASSERT_EQ(sums.size(), 4u);
  EXPECT_EQ(sums[0].day, "2024-03-01");
  EXPECT_EQ(sums[0].seconds, 1.0);
  EXPECT_EQ(sums[0].cost, 0.25);
  EXPECT_EQ(sums[1].day, "2024-03-02");
  EXPECT_EQ(sums[1].line, UsageLine::kIdle);
  EXPECT_EQ(sums[1].seconds, 2.0);
  EXPECT_EQ(sums[2].line, UsageLine::kSampling);
  EXPECT_EQ(sums[2].tokens, 40);
  EXPECT_EQ(sums[2].scope, BillingScope::kServerless);
  EXPECT_EQ(sums[3].line, UsageLine::kTraining);
  EXPECT_EQ(sums[3].cost, 0.5);
  // [start, end) in unix seconds.
  auto second_day = OrDie(md->SumUsage(org, day2 / 1000, 0));
  EXPECT_EQ(second_day.size(), 3u);
  EXPECT_EQ(OrDie(md->SumUsage(org, 0, day2 / 1000)).size(), 1u);

  const UsageSum job = OrDie(md->JobUsage("ftjob-1"));
  EXPECT_EQ(job.seconds, 2.0);
  EXPECT_EQ(job.cost, 0.875);
  EXPECT_EQ(job.tokens, 40);
  EXPECT_EQ(OrDie(md->JobUsage("ftjob-none")).cost, 0.0);
  auto runs = OrDie(md->UsageByRun(org));
  ASSERT_EQ(runs.size(), 3u);
  auto by_worker = OrDie(md->UsageByWorker(org));
  EXPECT_EQ(by_worker.at("wrk-c").at(UsageLine::kTraining), 2000);
  EXPECT_EQ(by_worker.at("wrk-c").at(UsageLine::kIdle), 2000);
  EXPECT_EQ(OrDie(md->WorkerUsage("wrk-c")).size(), 3u);
}

TEST_P(MetadataTest, SweepsAndDeploymentsRoundTrip) {
  auto md = OpenMetadata(NewDatabase());
  const std::string org = OrDie(md->CreateOrg("acme")).id;
  bool created = false;
  SweepRecord s;
  s.id = "sweep-1";
  s.org_id = org;
  s.idempotency_key = "k";
  s.request_sha256 = "a";
  s.runs = Json::array({Json{{"job_id", "ftjob-1"}}});
  ASSERT_TRUE(md->CreateSweep(s, &created).ok());
  EXPECT_TRUE(created);
  ASSERT_TRUE(md->CreateSweep(s, &created).ok());
  EXPECT_FALSE(created);
  s.request_sha256 = "b";
  EXPECT_EQ(md->CreateSweep(s, &created).status().code(), Code::kAlreadyExists);
  SweepRecord s2 = s;
  s2.id = "sweep-2";
  s2.idempotency_key = "";
  ASSERT_TRUE(md->CreateSweep(s2, &created).ok());
  EXPECT_EQ(OrDie(md->FindSweepByKey(org, "k"))->id, "sweep-1");
  EXPECT_FALSE(OrDie(md->FindSweepByKey(org, "none")).has_value());
  auto sweeps = OrDie(md->ListSweeps(org, "", 10));
  ASSERT_EQ(sweeps.size(), 2u);
  EXPECT_EQ(sweeps[0].id, "sweep-2");
  EXPECT_EQ(OrDie(md->ListSweeps(org, "sweep-2", 10)).size(), 1u);
  EXPECT_EQ(OrDie(md->GetSweep(org, "sweep-1")).runs, s.runs);
  EXPECT_TRUE(OrDie(md->CancelSweep(org, "sweep-1", 100)));
  EXPECT_FALSE(OrDie(md->CancelSweep(org, "sweep-1", 200)));
  EXPECT_EQ(OrDie(md->GetSweep(org, "sweep-1")).cancelled_at, 100);
  EXPECT_EQ(md->CancelSweep(org, "sweep-none", 1).status().code(), Code::kNotFound);

  DeploymentRecord d;
  d.id = "dep-1";
  d.org_id = org;
  d.name = "support";
  d.request_sha256 = "r1";
  d.target = Json{{"model", "m"}};
  ASSERT_TRUE(md->CreateDeployment(d, &created).ok());
  EXPECT_TRUE(created);
  DeploymentRecord same = d;
  same.id = "dep-unused";
  EXPECT_EQ(OrDie(md->CreateDeployment(same, &created)).id, "dep-1");
  EXPECT_FALSE(created);
  same.request_sha256 = "r2";
  EXPECT_EQ(md->CreateDeployment(same, &created).status().code(), Code::kAlreadyExists);
  ASSERT_TRUE(md->CountDeploymentRequest("dep-1", 5000, true).ok());
  ASSERT_TRUE(md->CountDeploymentRequest("dep-1", 6000, false).ok());
  auto got = OrDie(md->GetDeployment(org, "support"));
  EXPECT_EQ(got.id, "dep-1");
  EXPECT_EQ(got.requests, 2);
  EXPECT_EQ(got.cold_starts, 1);
  EXPECT_EQ(got.last_request_ms, 6000);
  EXPECT_EQ(got.target, d.target);
  ASSERT_TRUE(md->MarkDeploymentDeleted("dep-1", 7).ok());
  EXPECT_EQ(md->GetDeployment(org, "support").status().code(), Code::kNotFound);
  EXPECT_EQ(OrDie(md->GetDeployment(org, "dep-1")).deleted_at, 7);  // by id: still readable
  // The name is free again.
  DeploymentRecord d2 = d;
  d2.id = "dep-2";
  ASSERT_TRUE(md->CreateDeployment(d2, &created).ok());
  EXPECT_TRUE(created);
  EXPECT_EQ(OrDie(md->GetDeployment(org, "support")).id, "dep-2");
  EXPECT_EQ(OrDie(md->ListDeployments(org, false)).size(), 1u);
  EXPECT_EQ(OrDie(md->ListDeployments(org, true)).size(), 2u);
  EXPECT_EQ(OrDie(md->ListDeployments("", false)).size(), 1u);
  EXPECT_TRUE(OrDie(md->ListDeployments("org-other", true)).empty());
}

}  // namespace
}  // namespace burst
