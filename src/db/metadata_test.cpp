// Metadata on either backend (test_backend.h): every test runs on SQLite
// in db_test and on PostgreSQL in db_pg_test.
#include "db/metadata.h"

#include <gtest/gtest.h>

#include "core/fs.h"
#include "core/ids.h"
#include "db/test_backend.h"

namespace burst {
namespace {

TEST(Ids, ShapeAndUniqueness) {
  std::string a = NewId("ftjob"), b = NewId("ftjob");
  EXPECT_EQ(a.size(), 6u + 24u);
  EXPECT_EQ(a.rfind("ftjob-", 0), 0u);
  EXPECT_NE(a, b);
  for (char c : a.substr(6)) EXPECT_TRUE((c >= 'a' && c <= 'z') || (c >= '2' && c <= '7')) << a;
  EXPECT_EQ(NewSecret("burst").size(), 6u + 52u);
}

TEST_P(MetadataTest, KeysAuthenticateTheirOrgAndAreStoredHashed) {
  const std::string url = NewDatabase();
  std::string secret, org_id, key_id;
  {
    auto md = OpenMetadata(url);
    auto org = md->CreateOrg("acme");
    ASSERT_TRUE(org.ok()) << org.status().ToString();
    org_id = org.value().id;
    auto key = md->CreateApiKey(org_id, "admin");
    ASSERT_TRUE(key.ok()) << key.status().ToString();
    secret = key.value().secret;
    key_id = key.value().key.id;
    EXPECT_EQ(secret.rfind(key.value().key.prefix, 0), 0u);
  }
  auto md = OpenMetadata(url);  // survives a restart
  auto who = md->Authenticate(secret);
  ASSERT_TRUE(who.ok()) << who.status().ToString();
  EXPECT_EQ(who.value().org_id, org_id);
  EXPECT_EQ(who.value().id, key_id);
  EXPECT_EQ(md->Authenticate(secret + "x").status().code(), Code::kNotFound);
  EXPECT_EQ(md->Authenticate("").status().code(), Code::kNotFound);
  // The key's row holds the secret's hash, and the secret in no column
  // (sqlite_test.cpp also reads the file's bytes).
  auto raw = OpenDb(url);
  auto q =
      OrDie(raw->Prepare("SELECT secret_sha256, id || org_id || name || prefix || secret_sha256 || "
                         "created_at || revoked FROM api_keys"));
  ASSERT_TRUE(q.Step().value());
  EXPECT_EQ(q.Text(0), Sha256Hex(secret));
  EXPECT_EQ(q.Text(1).find(secret), std::string::npos);
  EXPECT_FALSE(q.Step().value());
}

TEST_P(MetadataTest, RevokedKeysStopWorkingAndOrgsAreIsolated) {
  auto md = OpenMetadata(NewDatabase());
  std::string a = md->CreateOrg("a").value().id, b = md->CreateOrg("b").value().id;
  auto ka = md->CreateApiKey(a, "ci").value();
  // Another organisation cannot revoke it, and learns nothing (404).
  EXPECT_EQ(md->RevokeApiKey(b, ka.key.id).code(), Code::kNotFound);
  EXPECT_TRUE(md->Authenticate(ka.secret).ok());
  ASSERT_TRUE(md->RevokeApiKey(a, ka.key.id).ok());
  EXPECT_EQ(md->Authenticate(ka.secret).status().code(), Code::kNotFound);
  auto keys = md->ListApiKeys(a);
  ASSERT_TRUE(keys.ok());
  ASSERT_EQ(keys.value().size(), 1u);
  EXPECT_TRUE(keys.value()[0].revoked);
  EXPECT_TRUE(md->ListApiKeys(b).value().empty());
  EXPECT_EQ(md->ListOrgs().value().size(), 2u);
}

TEST_P(MetadataTest, BadInputIsRejectedByField) {
  auto md = OpenMetadata(NewDatabase());
  Status empty = md->CreateOrg("").status();
  EXPECT_EQ(empty.code(), Code::kInvalidArgument);
  EXPECT_EQ(empty.param(), "name");
  EXPECT_EQ(md->CreateApiKey("org-nope", "k").status().code(), Code::kNotFound);
  EXPECT_EQ(md->GetOrg("org-nope").status().code(), Code::kNotFound);
  EXPECT_TRUE(md->ListOrgs().value().empty());
}

TEST_P(MetadataTest, FilesArePagedNewestFirstAndScopedToTheirOrg) {
  auto md = OpenMetadata(NewDatabase());
  std::string a = md->CreateOrg("a").value().id, b = md->CreateOrg("b").value().id;
  std::vector<std::string> ids;
  for (int i = 0; i < 5; ++i) {
    FileRecord f{NewId("file"),
                 a,
                 "f" + std::to_string(i) + ".jsonl",
                 "fine-tune",
                 10 + i,
                 std::string(64, 'a'),
                 "messages",
                 i + 1,
                 0,
                 "orgs/" + a + "/files/x"};
    ASSERT_TRUE(md->CreateFile(f).ok());
    EXPECT_GT(f.created_at, 1700000000);
    ids.push_back(f.id);
  }
  auto page1 = md->ListFiles(a, "", 2).value();
  ASSERT_EQ(page1.size(), 2u);
  EXPECT_EQ(page1[0].id, ids[4]);
  EXPECT_EQ(page1[1].id, ids[3]);
  auto page2 = md->ListFiles(a, page1.back().id, 10).value();
  ASSERT_EQ(page2.size(), 3u);
  EXPECT_EQ(page2[0].id, ids[2]);
  EXPECT_EQ(page2[2].filename, "f0.jsonl");
  EXPECT_EQ(page2[2].examples, 1);
  // Organisation b sees none of it, and cannot read or delete it.
  EXPECT_TRUE(md->ListFiles(b, "", 10).value().empty());
  EXPECT_EQ(md->GetFile(b, ids[0]).status().code(), Code::kNotFound);
  EXPECT_EQ(md->DeleteFile(b, ids[0]).code(), Code::kNotFound);
  ASSERT_TRUE(md->DeleteFile(a, ids[0]).ok());
  EXPECT_EQ(md->GetFile(a, ids[0]).status().code(), Code::kNotFound);
  EXPECT_EQ(md->ListFiles(a, "", 10).value().size(), 4u);
}

TEST_P(MetadataTest, AWorkerRecordAndTheUsageItClosedCommitTogetherOrNotAtAll) {
  const std::string url = NewDatabase();
  auto md = OpenMetadata(url);
  WorkerRecord w;
  w.id = "wrk-a";
  w.state = WorkerState::kBusy;
  w.seg_line = UsageLine::kTraining;
  w.seg_start_ms = 2000;
  UsageRecord startup{
      "wrk-a", "org-1", "ftjob-1", UsageLine::kStartup, 1000, 2000, 0.05, BillingScope::kDedicated, 0, ""};
  ASSERT_TRUE(md->PutWorker(w, {startup}).ok());
  ASSERT_EQ(md->WorkerUsage("wrk-a").value().size(), 1u);

  // A write that fails after the usage row went in: neither survives, so the
  // record still shows the segment open and nothing is billed twice.
  auto raw = OpenDb(url);
  ASSERT_TRUE(raw->Exec(CurrentBackend().FailInserts("workers")).ok());
  w.state = WorkerState::kIdle;
  w.seg_line = UsageLine::kIdle;
  w.seg_start_ms = 5000;
  UsageRecord training{
      "wrk-a", "org-1", "ftjob-1", UsageLine::kTraining, 2000, 5000, 0.15, BillingScope::kDedicated, 0, ""};
  Status s = md->PutWorker(w, {training});
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("disk gone"), std::string::npos) << s.ToString();
  EXPECT_EQ(md->WorkerUsage("wrk-a").value().size(), 1u);
  auto workers = md->ListWorkers(false).value();
  ASSERT_EQ(workers.size(), 1u);
  EXPECT_EQ(workers[0].seg_line, UsageLine::kTraining);
  EXPECT_EQ(workers[0].seg_start_ms, 2000);

  ASSERT_TRUE(raw->Exec(CurrentBackend().StopFailingInserts("workers")).ok());
  ASSERT_TRUE(md->PutWorker(w, {training}).ok());
  EXPECT_EQ(md->WorkerUsage("wrk-a").value().size(), 2u);
}

AttemptRecord FirstAttempt(const std::string& job_id, const std::string& worker_id) {
  AttemptRecord a;
  a.job_id = job_id;
  a.attempt = 1;
  a.worker_id = worker_id;
  a.started_ms = 1000;
  return a;
}

// Statuses, states, outcomes, lines and scopes go into rows by name and come
// back as the same values.
TEST_P(MetadataTest, StatesAreStoredByNameAndReadBack) {
  auto md = OpenMetadata(NewDatabase());
  const std::string org = md->CreateOrg("acme").value().id;
  JobRecord job;
  job.id = "ftjob-1";
  job.org_id = org;
  job.status = JobStatus::kQueued;
  job.request_sha256 = "x";
  bool created = false;
  ASSERT_TRUE(md->CreateJob(job, &created).ok());
  job.id = "ftjob-2";
  ASSERT_TRUE(md->CreateJob(job, &created).ok());
  job.status = JobStatus::kSucceeded;
  ASSERT_TRUE(md->UpdateJob(job).ok());
  EXPECT_EQ(md->GetJob(org, "ftjob-1").value().status, JobStatus::kQueued);
  EXPECT_EQ(md->GetJob(org, "ftjob-2").value().status, JobStatus::kSucceeded);
  auto active = md->ListActiveJobs().value();
  ASSERT_EQ(active.size(), 1u) << "a succeeded job is not active";
  EXPECT_EQ(active[0].id, "ftjob-1");

  ASSERT_TRUE(md->AddAttempt(FirstAttempt("ftjob-1", "wrk-a")).ok());
  EXPECT_FALSE(md->ListAttempts("ftjob-1").value()[0].outcome.has_value()) << "running: no outcome yet";
  ASSERT_TRUE(md->EndAttempt("ftjob-1", 1, 2000, AttemptOutcome::kTimeout, Json()).ok());
  EXPECT_EQ(md->ListAttempts("ftjob-1").value()[0].outcome, AttemptOutcome::kTimeout);
  EXPECT_TRUE(md->ListOpenAttempts().value().empty());

  WorkerRecord w;
  w.id = "wrk-a";
  w.state = WorkerState::kExited;
  w.seg_scope = BillingScope::kServerless;
  w.last_scope = BillingScope::kServerless;
  const BillingScope serverless = BillingScope::kServerless;
  UsageRecord seg{"wrk-a", org, "ftjob-1", UsageLine::kEvaluation, 1000, 3000, 0, serverless, 0, "ftjob-1"};
  UsageRecord tokens{"", org, "ftjob-1", UsageLine::kEvaluation, 3000, 3000, 0.5, serverless, 7, "ftjob-1"};
  ASSERT_TRUE(md->PutWorker(w, {seg, tokens}).ok());
  EXPECT_TRUE(md->ListWorkers(true).value().empty()) << "an exited worker is not live";
  auto all = md->ListWorkers(false).value();
  ASSERT_EQ(all.size(), 1u);
  EXPECT_EQ(all[0].state, WorkerState::kExited);
  EXPECT_FALSE(all[0].seg_line.has_value()) << "no segment open";
  EXPECT_EQ(all[0].seg_scope, BillingScope::kServerless);
  EXPECT_EQ(all[0].last_scope, BillingScope::kServerless);
  auto usage = md->WorkerUsage("wrk-a").value();
  ASSERT_EQ(usage.size(), 1u);
  EXPECT_EQ(usage[0].line, UsageLine::kEvaluation);
  EXPECT_EQ(usage[0].scope, BillingScope::kServerless);
  auto sums = md->SumUsage(org, 0, 0).value();
  ASSERT_EQ(sums.size(), 1u);
  EXPECT_EQ(sums[0].line, UsageLine::kEvaluation);
  EXPECT_EQ(sums[0].scope, BillingScope::kServerless);
  EXPECT_EQ(sums[0].tokens, 7);
  auto runs = md->UsageByRun(org).value();
  ASSERT_EQ(runs.size(), 1u);
  EXPECT_EQ(runs[0].line, UsageLine::kEvaluation);
  EXPECT_EQ(md->UsageByWorker(org).value().at("wrk-a").at(UsageLine::kEvaluation), 2000);
}

// A row holding a name this binary does not know (a newer binary's, or a
// damaged file) is kDataLoss naming the row and the field, never a guess.
TEST_P(MetadataTest, AnUnknownNameInARowIsDataLossNamingTheRow) {
  const std::string url = NewDatabase();
  auto md = OpenMetadata(url);
  const std::string org = md->CreateOrg("acme").value().id;
  JobRecord job;
  job.id = "ftjob-odd";
  job.org_id = org;
  job.request_sha256 = "x";
  bool created = false;
  ASSERT_TRUE(md->CreateJob(job, &created).ok());
  ASSERT_TRUE(md->AddAttempt(FirstAttempt("ftjob-odd", "wrk-odd")).ok());
  WorkerRecord w;
  w.id = "wrk-odd";
  UsageRecord u;
  u.worker_id = "wrk-odd";
  u.org_id = org;
  u.line = UsageLine::kTraining;
  u.end_ms = 1000;
  ASSERT_TRUE(md->PutWorker(w, {u}).ok());

  auto raw = OpenDb(url);
  ASSERT_TRUE(raw->Exec("UPDATE jobs SET status = 'hibernating'; UPDATE attempts SET outcome = 'vanished'; "
                        "UPDATE usage SET line = 'coffee_break', scope = 'dedicated';"
                        "UPDATE workers SET record = replace(record, '\"state\":\"starting\"', "
                        "'\"state\":\"napping\"');")
                  .ok());
  auto expect_data_loss = [](const Status& s, const std::string& row, const std::string& field,
                             const std::string& name) {
    EXPECT_EQ(s.code(), Code::kDataLoss) << s.ToString();
    EXPECT_NE(s.message().find(row), std::string::npos) << s.message();
    EXPECT_NE(s.message().find(field + ": unknown"), std::string::npos) << s.message();
    EXPECT_NE(s.message().find("\"" + name + "\""), std::string::npos) << s.message();
  };
  expect_data_loss(md->GetJob(org, "ftjob-odd").status(), "job ftjob-odd", "status", "hibernating");
  expect_data_loss(md->ListJobs(org, "", 10).status(), "job ftjob-odd", "status", "hibernating");
  expect_data_loss(md->ListAttempts("ftjob-odd").status(), "attempt 1 of ftjob-odd", "outcome", "vanished");
  expect_data_loss(md->ListWorkers(false).status(), "worker wrk-odd", "state", "napping");
  expect_data_loss(md->WorkerUsage("wrk-odd").status(), "usage of worker wrk-odd", "line", "coffee_break");
  expect_data_loss(md->SumUsage(org, 0, 0).status(), "usage of", "line", "coffee_break");
  expect_data_loss(md->UsageByRun(org).status(), "usage of run", "line", "coffee_break");
  expect_data_loss(md->UsageByWorker(org).status(), "usage of worker wrk-odd", "line", "coffee_break");

  // A scope recorded in a job's spec or a deployment's target is read the
  // same way; records from before scopes existed have none (dedicated).
  EXPECT_EQ(RecordedScope(Json{{"scope", "serverless"}}, "job ftjob-odd").value(), BillingScope::kServerless);
  EXPECT_EQ(RecordedScope(Json::object(), "job ftjob-odd").value(), BillingScope::kDedicated);
  expect_data_loss(RecordedScope(Json{{"scope", "shared"}}, "job ftjob-odd").status(), "job ftjob-odd",
                   "scope", "shared");
  EXPECT_EQ(RecordedScope(Json{{"scope", 3}}, "job ftjob-odd").status().code(), Code::kDataLoss);
}

}  // namespace
}  // namespace burst
