// db_pg_test: the shared Db and Metadata suites (test_backend.h) on
// PostgreSQL, and what is PostgreSQL's alone: control
// planes sharing one database, a server that stops and comes back, logins
// that fail. The server is real: tests/pg/pg-up.sh starts PostgreSQL 15 in
// a temporary folder (unix socket only) before the first test and
// pg-down.sh stops it after the last; each test gets a schema of its own.
// Without PostgreSQL installed every test fails, saying so.
#include "db/postgres.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <thread>

#include "core/fs.h"
#include "core/subprocess.h"
#include "db/metadata.h"
#include "db/test_backend.h"

namespace burst {
namespace {

class PgServer final : public TestBackend, public testing::Environment {
 public:
  void SetUp() override {
    dir_ = MakeTempDir("burst-pg-test");
    port_ = 20000 + static_cast<int>(::getpid() % 20000);
    const Status up = Start();
    ASSERT_TRUE(up.ok()) << "cannot start PostgreSQL for db_pg_test: " << up.ToString();
    admin_ = OrDie(Db::Open(Url("postgres")));
    // C collation: text sorts byte-wise, as in SQLite.
    ASSERT_TRUE(
        Admin("CREATE DATABASE burst TEMPLATE template0 ENCODING 'UTF8' LC_COLLATE 'C' LC_CTYPE 'C'").ok());
    burst_ = OrDie(Db::Open(Url("burst")));
  }
  void TearDown() override {
    burst_.reset();
    admin_.reset();
    Stop().IgnoreError("the folder goes next; pg-down.sh printed why");
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }

  // tests/pg/pg-up.sh DIR PORT (starts it again when it was initialised).
  // Without fsync: these tests never pull the power, and the restart tests'
  // shutdown checkpoints then take milliseconds, not seconds.
  Status Start() { return Script("pg-up.sh", {dir_.string(), std::to_string(port_), "-c", "fsync=off"}); }
  Status Stop() { return Script("pg-down.sh", {dir_.string()}); }

  // A database URL on this server: user and password as given.
  std::string Url(const std::string& db, const std::string& userinfo = "postgres") const {
    return "postgresql://" + userinfo + "@/" + db + "?host=" + dir_.string() +
           "&port=" + std::to_string(port_);
  }
  std::string socket_dir() const { return dir_.string(); }

  // As the superuser.
  Status Admin(const std::string& sql) { return admin_->Exec(sql); }

  // A schema of its own in the database `burst` (a database each would
  // cost ~0.5 s to create): the URL's search_path names it.
  std::string NewDatabase() override {
    const std::string name = "t" + std::to_string(++databases_);
    Status s = burst_->Exec("CREATE SCHEMA " + name);
    EXPECT_TRUE(s.ok()) << s.ToString();
    return Url("burst") + "&options=-csearch_path%3D" + name;
  }
  std::string FailInserts(const std::string& table) override {
    return "CREATE FUNCTION fail_insert() RETURNS trigger LANGUAGE plpgsql AS $$BEGIN RAISE EXCEPTION 'disk "
           "gone'; "
           "END$$; CREATE TRIGGER fail_" +
           table + " BEFORE INSERT ON " + table + " FOR EACH ROW EXECUTE FUNCTION fail_insert();";
  }
  std::string StopFailingInserts(const std::string& table) override {
    return "DROP TRIGGER fail_" + table + " ON " + table + "; DROP FUNCTION fail_insert();";
  }

 private:
  Status Script(const std::string& name, std::vector<std::string> args) {
    args.insert(args.begin(), std::string(BURST_SOURCE_DIR) + "/tests/pg/" + name);
    auto r = RunCommand(args, 120'000);
    if (!r.ok()) return r.status();
    if (r.value().exit_code != 0) {
      return Status(Code::kUnavailable, CommandLine(args) + " exited " + std::to_string(r.value().exit_code) +
                                            ": " + r.value().err + r.value().out);
    }
    return Status();
  }

  fs::path dir_;
  int port_ = 0;
  int databases_ = 0;
  std::unique_ptr<Db> admin_;  // to the database `postgres`
  std::unique_ptr<Db> burst_;  // to the database `burst`
};

PgServer* const g_server = static_cast<PgServer*>(testing::AddGlobalTestEnvironment(new PgServer));

}  // namespace

TestBackend& CurrentBackend() { return *g_server; }

BURST_DB_TEST_BACKEND(postgresql);

namespace {

JobRecord Job(const std::string& org, const std::string& id) {
  JobRecord j;
  j.id = id;
  j.org_id = org;
  j.request_sha256 = "sha";
  return j;
}

// Two control planes (two Metadata, two connections) on one database, each
// from its own threads: transactions serialize and nothing is lost.
TEST(Postgres, TwoControlPlanesOnOneDatabaseLoseNothing) {
  const std::string url = g_server->NewDatabase();
  auto a = OpenMetadata(url);
  auto b = OpenMetadata(url);
  const std::string org = a->CreateOrg("acme").value().id;
  constexpr int kEach = 60;
  std::atomic<int> created_deployments{0};
  std::atomic<int> errors{0};
  auto plane = [&](Metadata* md, const std::string& tag) {
    for (int i = 0; i < kEach; ++i) {
      bool created = false;
      std::vector<EventRecord> first(2);
      auto job = md->CreateJob(Job(org, "ftjob-" + tag + std::to_string(i)), &created, first);
      if (!job.ok() || !created) ++errors;
      // Both create the same deployment: one creates it, the other gets it
      // back (the read and the insert of one transaction are not split by
      // the other's).
      DeploymentRecord d;
      d.id = "dep-" + tag + std::to_string(i);
      d.org_id = org;
      d.name = "name-" + std::to_string(i);
      d.request_sha256 = "same";
      auto dep = md->CreateDeployment(d, &created);
      if (!dep.ok()) {
        ++errors;
        ADD_FAILURE() << dep.status().ToString();
      } else if (created) {
        ++created_deployments;
      }
      if (!md->CountDeploymentRequest("dep-none", i, false).ok()) ++errors;
      WorkerRecord w;
      w.id = "wrk-" + tag;
      w.state = WorkerState::kBusy;
      UsageRecord u{w.id, org, "", UsageLine::kTraining, i * 10, i * 10 + 10, 0.5, BillingScope::kDedicated,
                    0,    ""};
      if (!md->PutWorker(w, {u}).ok()) ++errors;
    }
  };
  std::thread ta(plane, a.get(), "a"), tb(plane, b.get(), "b");
  ta.join();
  tb.join();
  EXPECT_EQ(errors.load(), 0);
  EXPECT_EQ(created_deployments.load(), kEach);
  auto jobs = a->ListJobs(org, "", 1000).value();
  EXPECT_EQ(jobs.size(), 2u * kEach);
  for (const auto& j : jobs) EXPECT_EQ(b->ListEvents(j.id, "", 10, true).value().size(), 2u) << j.id;
  for (int i = 0; i < kEach; ++i) {
    auto d = b->GetDeployment(org, "name-" + std::to_string(i));
    ASSERT_TRUE(d.ok()) << d.status().ToString();
  }
  EXPECT_EQ(a->ListDeployments(org, true).value().size(), static_cast<size_t>(kEach));
  EXPECT_EQ(a->WorkerUsage("wrk-a").value().size(), static_cast<size_t>(kEach));
  EXPECT_EQ(b->WorkerUsage("wrk-b").value().size(), static_cast<size_t>(kEach));
  EXPECT_EQ(a->ListWorkers(false).value().size(), 2u);
}

// pg_ctl stop, then start: calls meanwhile are kUnavailable naming the
// database, the first call after recovers; a restart between two calls is
// not seen at all.
TEST(Postgres, AStoppedServerIsUnavailableAndTheNextCallAfterItsStartRecovers) {
  const std::string url = g_server->NewDatabase();
  auto md = OpenMetadata(url);
  const std::string org = md->CreateOrg("acme").value().id;

  ASSERT_TRUE(g_server->Stop().ok());
  for (int i = 0; i < 2; ++i) {
    auto r = md->GetOrg(org);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), Code::kUnavailable) << r.status().ToString();
    EXPECT_NE(r.status().message().find(url), std::string::npos) << r.status().message();
  }
  bool created = false;
  EXPECT_EQ(md->CreateJob(Job(org, "ftjob-down"), &created).status().code(), Code::kUnavailable);
  ASSERT_TRUE(g_server->Start().ok());
  ASSERT_TRUE(md->GetOrg(org).ok());
  ASSERT_TRUE(md->CreateJob(Job(org, "ftjob-up"), &created).ok());

  // Stopped and started between two calls: the next call reconnects first.
  ASSERT_TRUE(g_server->Stop().ok());
  ASSERT_TRUE(g_server->Start().ok());
  auto r = md->GetJob(org, "ftjob-up");
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(md->GetJob(org, "ftjob-down").status().code(), Code::kNotFound);
}

// The server goes away inside a transaction: it fails kUnavailable, nothing
// of it is kept, and the connection is usable at the next call.
TEST(Postgres, AServerLostInsideATransactionFailsItAndNothingIsKept) {
  const std::string url = g_server->NewDatabase();
  auto db = OpenDb(url);
  ASSERT_TRUE(db->Exec("CREATE TABLE t (n INTEGER NOT NULL)").ok());
  Status s = db->Transaction([&]() -> Status {
    if (Status e = db->Exec("INSERT INTO t VALUES (1)"); !e.ok()) return e;
    if (Status e = g_server->Stop(); !e.ok()) return Status(Code::kCancelled, e.message());
    return db->Exec("INSERT INTO t VALUES (2)");
  });
  EXPECT_EQ(s.code(), Code::kUnavailable) << s.ToString();
  ASSERT_TRUE(g_server->Start().ok());
  auto q = db->Prepare("SELECT COUNT(*) FROM t");
  ASSERT_TRUE(q.ok()) << q.status().ToString();
  ASSERT_TRUE(q.value().Step().value());
  EXPECT_EQ(q.value().Int(0), 0);
}

TEST(Postgres, AWrongPasswordOrNoServerIsClearAndNeverShowsThePassword) {
  const std::string db = "pw";
  ASSERT_TRUE(g_server->Admin("CREATE ROLE burst_pw LOGIN PASSWORD 'right-horse-battery'").ok());
  ASSERT_TRUE(
      g_server
          ->Admin("CREATE DATABASE " + db + " OWNER burst_pw TEMPLATE template0 LC_COLLATE 'C' LC_CTYPE 'C'")
          .ok());

  const std::string wrong = g_server->Url(db, "burst_pw:wrong-staple");
  auto r = Metadata::Open(wrong);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kUnavailable) << r.status().ToString();
  EXPECT_EQ(r.status().param(), "database");
  EXPECT_NE(r.status().message().find(g_server->Url(db, "burst_pw:***")), std::string::npos)
      << r.status().message();
  EXPECT_NE(r.status().message().find("password authentication failed"), std::string::npos)
      << r.status().message();
  EXPECT_EQ(r.status().message().find("wrong-staple"), std::string::npos) << r.status().message();

  // In the query too.
  const std::string in_query = g_server->Url(db, "burst_pw") + "&password=wrong-staple";
  r = Metadata::Open(in_query);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("password=***"), std::string::npos) << r.status().message();
  EXPECT_EQ(r.status().message().find("wrong-staple"), std::string::npos) << r.status().message();

  auto right = Metadata::Open(g_server->Url(db, "burst_pw:right-horse-battery"));
  ASSERT_TRUE(right.ok()) << right.status().ToString();
  EXPECT_TRUE(right.value()->CreateOrg("acme").ok());

  // No server there: a socket folder without one, a closed TCP port.
  for (const std::string& url :
       {"postgresql://burst_pw:right-horse-battery@/pw?host=" + g_server->socket_dir() + "/nowhere&port=5432",
        std::string("postgresql://burst_pw:right-horse-battery@127.0.0.1:1/pw")}) {
    auto none = Metadata::Open(url);
    ASSERT_FALSE(none.ok()) << url;
    EXPECT_EQ(none.status().code(), Code::kUnavailable) << none.status().ToString();
    EXPECT_NE(none.status().message().find("cannot connect to database postgresql://burst_pw:***@"),
              std::string::npos)
        << none.status().message();
    EXPECT_EQ(none.status().message().find("right-horse-battery"), std::string::npos)
        << none.status().message();
  }
}

TEST(Postgres, TextWithANulCharacterIsRefusedNotTruncated) {
  auto db = OpenDb(g_server->NewDatabase());
  ASSERT_EQ(db->backend(), Backend::kPostgres);
  ASSERT_TRUE(db->Exec("CREATE TABLE t (s TEXT NOT NULL)").ok());
  auto ins = OrDie(db->Prepare("INSERT INTO t (s) VALUES (?)"));
  Status s = ins.Bind(1, std::string("a\0b", 3)).Run();
  EXPECT_EQ(s.code(), Code::kInvalidArgument) << s.ToString();
  EXPECT_NE(s.message().find("NUL"), std::string::npos) << s.message();
  ASSERT_TRUE(ins.Bind(1, std::string("ab")).Run().ok());
}

// What Burst created on the server: its tables, and nothing that a later
// migration would trip over.
TEST(Postgres, TheSchemaUsesPostgresTypes) {
  const std::string url = g_server->NewDatabase();
  OpenMetadata(url);
  auto db = OpenDb(url);
  auto q = OrDie(db->Prepare(
      "SELECT table_name || '.' || column_name || ' ' || data_type FROM information_schema.columns "
      "WHERE table_schema = current_schema() AND column_name IN ('seq', 'created_at', 'run_seconds', 'spec') "
      "ORDER BY 1"));
  std::vector<std::string> cols;
  while (q.Step().value()) cols.push_back(q.Text(0));
  EXPECT_NE(std::find(cols.begin(), cols.end(), "jobs.seq bigint"), cols.end());
  EXPECT_NE(std::find(cols.begin(), cols.end(), "jobs.run_seconds double precision"), cols.end());
  EXPECT_NE(std::find(cols.begin(), cols.end(), "jobs.spec text"), cols.end());
  EXPECT_NE(std::find(cols.begin(), cols.end(), "workers.seq bigint"), cols.end());
}

}  // namespace
}  // namespace burst
