#include "db/metadata.h"

#include <gtest/gtest.h>

#include "core/fs.h"
#include "core/ids.h"
#include "db/sqlite.h"

namespace burst {
namespace {

std::unique_ptr<Metadata> OpenOrDie(const std::string& path) {
  auto r = Metadata::Open(path);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return std::move(r).value();
}

TEST(Ids, ShapeAndUniqueness) {
  std::string a = NewId("ftjob"), b = NewId("ftjob");
  EXPECT_EQ(a.size(), 6u + 24u);
  EXPECT_EQ(a.rfind("ftjob-", 0), 0u);
  EXPECT_NE(a, b);
  for (char c : a.substr(6)) EXPECT_TRUE((c >= 'a' && c <= 'z') || (c >= '2' && c <= '7')) << a;
  EXPECT_EQ(NewSecret("burst").size(), 6u + 52u);
}

TEST(Metadata, KeysAuthenticateTheirOrgAndAreStoredHashed) {
  fs::path dir = MakeTempDir("burst-meta-test");
  std::string path = (dir / "meta.db").string();
  std::string secret, org_id, key_id;
  {
    auto md = OpenOrDie(path);
    auto org = md->CreateOrg("acme");
    ASSERT_TRUE(org.ok()) << org.status().ToString();
    org_id = org.value().id;
    auto key = md->CreateApiKey(org_id, "admin");
    ASSERT_TRUE(key.ok()) << key.status().ToString();
    secret = key.value().secret;
    key_id = key.value().key.id;
    EXPECT_EQ(secret.rfind(key.value().key.prefix, 0), 0u);
  }
  auto md = OpenOrDie(path);  // survives a restart
  auto who = md->Authenticate(secret);
  ASSERT_TRUE(who.ok()) << who.status().ToString();
  EXPECT_EQ(who.value().org_id, org_id);
  EXPECT_EQ(who.value().id, key_id);
  EXPECT_EQ(md->Authenticate(secret + "x").status().code(), Code::kNotFound);
  EXPECT_EQ(md->Authenticate("").status().code(), Code::kNotFound);
  // The secret itself is nowhere in the database files.
  std::string bytes;
  for (const auto& e : fs::directory_iterator(dir)) bytes += ReadFile(e.path());
  EXPECT_EQ(bytes.find(secret), std::string::npos);
  EXPECT_NE(bytes.find(Sha256Hex(secret)), std::string::npos);
  fs::remove_all(dir);
}

TEST(Metadata, RevokedKeysStopWorkingAndOrgsAreIsolated) {
  auto md = OpenOrDie(":memory:");
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

TEST(Metadata, BadInputIsRejectedByField) {
  auto md = OpenOrDie(":memory:");
  Status empty = md->CreateOrg("").status();
  EXPECT_EQ(empty.code(), Code::kInvalidArgument);
  EXPECT_EQ(empty.param(), "name");
  EXPECT_EQ(md->CreateApiKey("org-nope", "k").status().code(), Code::kNotFound);
  EXPECT_EQ(md->GetOrg("org-nope").status().code(), Code::kNotFound);
  EXPECT_TRUE(md->ListOrgs().value().empty());
}


TEST(Metadata, FilesArePagedNewestFirstAndScopedToTheirOrg) {
  auto md = OpenOrDie(":memory:");
  std::string a = md->CreateOrg("a").value().id, b = md->CreateOrg("b").value().id;
  std::vector<std::string> ids;
  for (int i = 0; i < 5; ++i) {
    FileRecord f{NewId("file"), a, "f" + std::to_string(i) + ".jsonl", "fine-tune", 10 + i,
                 std::string(64, 'a'), "messages", i + 1, 0, "orgs/" + a + "/files/x"};
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

TEST(Metadata, AWorkerRecordAndTheUsageItClosedCommitTogetherOrNotAtAll) {
  fs::path dir = MakeTempDir("burst-meta-test");
  std::string path = (dir / "meta.db").string();
  auto md = OpenOrDie(path);
  WorkerRecord w;
  w.id = "wrk-a";
  w.state = "busy";
  w.seg_line = "training";
  w.seg_start_ms = 2000;
  UsageRecord startup{"wrk-a", "org-1", "ftjob-1", "startup", 1000, 2000, 0.05};
  ASSERT_TRUE(md->PutWorker(w, {startup}).ok());
  ASSERT_EQ(md->WorkerUsage("wrk-a").value().size(), 1u);

  // A write that fails after the usage row went in: neither survives, so the
  // record still shows the segment open and nothing is billed twice.
  auto raw = Db::Open(path);
  ASSERT_TRUE(raw.ok());
  ASSERT_TRUE(raw.value()->Exec("CREATE TRIGGER no_workers BEFORE INSERT ON workers "
                                "BEGIN SELECT RAISE(ABORT, 'disk gone'); END;").ok());
  w.state = "idle";
  w.seg_line = "idle";
  w.seg_start_ms = 5000;
  UsageRecord training{"wrk-a", "org-1", "ftjob-1", "training", 2000, 5000, 0.15};
  Status s = md->PutWorker(w, {training});
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(md->WorkerUsage("wrk-a").value().size(), 1u);
  auto workers = md->ListWorkers(false).value();
  ASSERT_EQ(workers.size(), 1u);
  EXPECT_EQ(workers[0].seg_line, "training");
  EXPECT_EQ(workers[0].seg_start_ms, 2000);

  ASSERT_TRUE(raw.value()->Exec("DROP TRIGGER no_workers").ok());
  ASSERT_TRUE(md->PutWorker(w, {training}).ok());
  EXPECT_EQ(md->WorkerUsage("wrk-a").value().size(), 2u);
}

}  // namespace
}  // namespace burst
