// Db on either backend (test_backend.h): binding and columns, errors,
// migrations, transactions, two connections.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <regex>
#include <thread>

#include "db/test_backend.h"

namespace burst {
namespace {

int64_t CountRows(Db& db, const std::string& table) {
  auto q = OrDie(db.Prepare("SELECT COUNT(*) FROM " + table));
  EXPECT_TRUE(q.Step().value());
  return q.Int(0);
}

const std::vector<std::string> kSteps = {
    "CREATE TABLE t (id INTEGER PRIMARY KEY AUTOINCREMENT, name TEXT NOT NULL UNIQUE, note TEXT)",
    "ALTER TABLE t ADD COLUMN score REAL NOT NULL DEFAULT 0",
};

TEST_P(DbTest, BindStepAndColumns) {
  auto db = OpenDb(NewDatabase());
  ASSERT_TRUE(db->Migrate(kSteps).ok());
  // Quotes and question marks inside a value are data, not SQL.
  const std::string name = "it's \"?1\" ? é";
  auto ins = OrDie(db->Prepare("INSERT INTO t (name, note, score) VALUES (?, ?, ?) RETURNING id"));
  ins.Bind(1, name).BindNull(2).Bind(3, 0.1);
  ASSERT_TRUE(ins.Step().value());
  const int64_t id = ins.Int(0);
  EXPECT_GT(id, 0);
  EXPECT_FALSE(ins.Step().value());
  EXPECT_EQ(db->Changes(), 1);
  auto q = OrDie(
      db->Prepare("SELECT id, name, note, score, 'a ? in a literal' FROM t WHERE name = ?1 AND id = ?2"));
  q.Bind(1, name).Bind(2, id);
  ASSERT_TRUE(q.Step().value());
  EXPECT_EQ(q.Int(0), id);
  EXPECT_EQ(q.Text(1), name);
  EXPECT_TRUE(q.IsNull(2));
  EXPECT_EQ(q.Text(2), "");
  EXPECT_EQ(q.Int(2), 0);
  EXPECT_EQ(q.Real(3), 0.1);  // exactly
  EXPECT_EQ(q.Text(4), "a ? in a literal");
  EXPECT_FALSE(q.Step().value());
}

TEST_P(DbTest, IntegersAre64BitAndRealsExact) {
  auto db = OpenDb(NewDatabase());
  ASSERT_TRUE(db->Exec("CREATE TABLE n (i INTEGER NOT NULL, r REAL NOT NULL)").ok());
  const std::vector<std::pair<int64_t, double>> values = {
      {INT64_MAX, 1e300}, {INT64_MIN, -2.2250738585072014e-308}, {0, 1.0 / 3}, {-1, 123456789.123456789}};
  for (const auto& [i, r] : values) {
    ASSERT_TRUE(OrDie(db->Prepare("INSERT INTO n (i, r) VALUES (?, ?)")).Bind(1, i).Bind(2, r).Run().ok());
  }
  auto q = OrDie(db->Prepare("SELECT i, r FROM n ORDER BY r"));
  std::vector<std::pair<int64_t, double>> back;
  while (q.Step().value()) back.emplace_back(q.Int(0), q.Real(1));
  auto want = values;
  std::sort(want.begin(), want.end(), [](auto& a, auto& b) { return a.second < b.second; });
  EXPECT_EQ(back, want);
}

TEST_P(DbTest, AStatementRunsAgainWithNewBindingsAndResets) {
  auto db = OpenDb(NewDatabase());
  ASSERT_TRUE(db->Migrate(kSteps).ok());
  auto ins = OrDie(db->Prepare("INSERT INTO t (name) VALUES (?)"));
  for (const char* n : {"a", "b", "c"}) ASSERT_TRUE(ins.Bind(1, std::string(n)).Run().ok());
  auto q = OrDie(db->Prepare("SELECT name FROM t ORDER BY name"));
  ASSERT_TRUE(q.Step().value());
  EXPECT_EQ(q.Text(0), "a");
  q.Reset();
  ASSERT_TRUE(q.Step().value());
  EXPECT_EQ(q.Text(0), "a");
  ASSERT_TRUE(q.Step().value());
  EXPECT_EQ(q.Text(0), "b");
  q.Reset();
  EXPECT_EQ(CountRows(*db, "t"), 3);
}

TEST_P(DbTest, ConstraintsMapToCodes) {
  auto db = OpenDb(NewDatabase());
  ASSERT_TRUE(db->Migrate(kSteps).ok());
  ASSERT_TRUE(db->Exec("INSERT INTO t (name) VALUES ('x')").ok());
  Status dup = db->Exec("INSERT INTO t (name) VALUES ('x')");
  EXPECT_EQ(dup.code(), Code::kAlreadyExists) << dup.ToString();
  auto ins = OrDie(db->Prepare("INSERT INTO t (name) VALUES (?)"));
  Status dup2 = ins.Bind(1, std::string("x")).Run();
  EXPECT_EQ(dup2.code(), Code::kAlreadyExists) << dup2.ToString();
  EXPECT_NE(dup2.message().find("(in: INSERT INTO t"), std::string::npos) << dup2.message();
  Status null = db->Exec("INSERT INTO t (name) VALUES (NULL)");
  EXPECT_EQ(null.code(), Code::kFailedPrecondition) << null.ToString();
  EXPECT_EQ(db->Prepare("SELEC nonsense").status().code(), Code::kInternal);
  EXPECT_EQ(db->Prepare("SELECT nothing FROM nowhere").status().code(), Code::kInternal);
  // The connection is fine after errors.
  EXPECT_EQ(CountRows(*db, "t"), 1);
}

TEST_P(DbTest, UpsertReplacesTheRow) {
  auto db = OpenDb(NewDatabase());
  ASSERT_TRUE(db->Exec("CREATE TABLE kv (k TEXT PRIMARY KEY, v TEXT NOT NULL)").ok());
  auto put =
      OrDie(db->Prepare("INSERT INTO kv (k, v) VALUES (?, ?) ON CONFLICT (k) DO UPDATE SET v = excluded.v"));
  ASSERT_TRUE(put.Bind(1, std::string("a")).Bind(2, std::string("1")).Run().ok());
  ASSERT_TRUE(put.Bind(1, std::string("a")).Bind(2, std::string("2")).Run().ok());
  EXPECT_EQ(db->Changes(), 1);
  auto q = OrDie(db->Prepare("SELECT v FROM kv WHERE k = 'a'"));
  ASSERT_TRUE(q.Step().value());
  EXPECT_EQ(q.Text(0), "2");
  EXPECT_EQ(CountRows(*db, "kv"), 1);
}

TEST_P(DbTest, JsonTextReadsATopLevelField) {
  auto db = OpenDb(NewDatabase());
  ASSERT_TRUE(db->Exec("CREATE TABLE docs (id INTEGER NOT NULL, doc TEXT NOT NULL)").ok());
  ASSERT_TRUE(
      db->Exec("INSERT INTO docs VALUES (1, '{\"kind\":\"eval\",\"n\":{\"kind\":\"x\"}}'), (2, '{}')").ok());
  auto q = OrDie(
      db->Prepare("SELECT id, COALESCE(" + db->JsonText("doc", "kind") + ", 'train') FROM docs ORDER BY id"));
  ASSERT_TRUE(q.Step().value());
  EXPECT_EQ(q.Text(1), "eval");
  ASSERT_TRUE(q.Step().value());
  EXPECT_EQ(q.Text(1), "train");
}

TEST_P(DbTest, MigrationsRunOnceAndInOrder) {
  const std::string url = NewDatabase();
  {
    auto db = OpenDb(url);
    ASSERT_TRUE(db->Migrate({kSteps[0]}).ok());
    EXPECT_EQ(db->SchemaVersion().value(), 1);
    ASSERT_TRUE(db->Exec("INSERT INTO t (name) VALUES ('kept')").ok());
  }
  {
    auto db = OpenDb(url);  // a newer binary: one more step
    ASSERT_TRUE(db->Migrate(kSteps).ok());
    ASSERT_TRUE(db->Migrate(kSteps).ok());  // again: nothing to do
    EXPECT_EQ(db->SchemaVersion().value(), 2);
    EXPECT_EQ(CountRows(*db, "t"), 1);
    EXPECT_EQ(CountRows(*db, "schema_migrations"), 2);
    auto q = OrDie(db->Prepare("SELECT version, applied_at FROM schema_migrations ORDER BY version"));
    for (int64_t v = 1; v <= 2; ++v) {
      ASSERT_TRUE(q.Step().value());
      EXPECT_EQ(q.Int(0), v);
      EXPECT_TRUE(std::regex_match(q.Text(1), std::regex(R"(20\d\d-\d\d-\d\d \d\d:\d\d:\d\d)"))) << q.Text(1);
    }
  }
  {
    auto db = OpenDb(url);  // an older binary must not touch it
    Status s = db->Migrate({kSteps[0]});
    EXPECT_EQ(s.code(), Code::kFailedPrecondition);
    EXPECT_NE(s.message().find("newer"), std::string::npos) << s.message();
  }
}

TEST_P(DbTest, FailedMigrationLeavesNothingHalfDone) {
  auto db = OpenDb(NewDatabase());
  Status s = db->Migrate({kSteps[0], "CREATE TABLE u (x INTEGER); CREATE TABLE broken ("});
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("schema migration 2"), std::string::npos) << s.message();
  EXPECT_EQ(db->SchemaVersion().value(), 1);
  EXPECT_FALSE(db->Prepare("SELECT * FROM u").ok());  // rolled back with its step
}

TEST_P(DbTest, TransactionRollsBackOnErrorOrThrow) {
  auto db = OpenDb(NewDatabase());
  ASSERT_TRUE(db->Migrate(kSteps).ok());
  Status s = db->Transaction([&]() -> Status {
    if (Status e = db->Exec("INSERT INTO t (name) VALUES ('gone')"); !e.ok()) return e;
    return Status(Code::kInvalidArgument, "changed my mind");
  });
  EXPECT_EQ(s.code(), Code::kInvalidArgument);
  EXPECT_EQ(CountRows(*db, "t"), 0);
  s = db->Transaction([&]() -> Status {
    if (Status e = db->Exec("INSERT INTO t (name) VALUES ('gone too')"); !e.ok()) return e;
    throw Error(Code::kDataLoss, "thrown");
  });
  EXPECT_EQ(s.code(), Code::kDataLoss);
  EXPECT_EQ(CountRows(*db, "t"), 0);
  // A failed statement inside: its error, and nothing kept.
  s = db->Transaction([&]() -> Status {
    if (Status e = db->Exec("INSERT INTO t (name) VALUES ('dup')"); !e.ok()) return e;
    return db->Exec("INSERT INTO t (name) VALUES ('dup')");
  });
  EXPECT_EQ(s.code(), Code::kAlreadyExists) << s.ToString();
  EXPECT_EQ(CountRows(*db, "t"), 0);
  ASSERT_TRUE(db->Transaction([&] { return db->Exec("INSERT INTO t (name) VALUES ('kept')"); }).ok());
  EXPECT_EQ(CountRows(*db, "t"), 1);
}

TEST_P(DbTest, AReaderIsNotBlockedByAnOpenWrite) {
  const std::string url = NewDatabase();
  auto writer = OpenDb(url);
  auto reader = OpenDb(url);
  ASSERT_TRUE(writer->Migrate(kSteps).ok());
  ASSERT_TRUE(writer->Exec("BEGIN; INSERT INTO t (name) VALUES ('w');").ok());
  EXPECT_EQ(CountRows(*reader, "t"), 0);
  ASSERT_TRUE(writer->Exec("COMMIT").ok());
  EXPECT_EQ(CountRows(*reader, "t"), 1);
}

// Read-then-write transactions on two connections at once: serialized, so
// no increment is lost (each waits 1 ms between its read and its write,
// which without serialization loses most of them).
TEST_P(DbTest, TransactionsOfTwoConnectionsAreSerialized) {
  const std::string url = NewDatabase();
  std::unique_ptr<Db> conns[2] = {OpenDb(url), OpenDb(url)};
  ASSERT_TRUE(
      conns[0]->Exec("CREATE TABLE counter (n INTEGER NOT NULL); INSERT INTO counter VALUES (0);").ok());
  constexpr int kEach = 50;
  std::atomic<int> failures{0}, ready{0};
  auto bump = [&](Db* db) {
    ++ready;
    while (ready.load() < 2) std::this_thread::yield();
    for (int i = 0; i < kEach; ++i) {
      Status s = db->Transaction([&]() -> Status {
        auto q = db->Prepare("SELECT n FROM counter");
        if (!q.ok()) return q.status();
        auto row = q.value().Step();
        if (!row.ok()) return row.status();
        const int64_t n = q.value().Int(0);
        q.value().Reset();
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
        auto u = db->Prepare("UPDATE counter SET n = ?");
        if (!u.ok()) return u.status();
        return u.value().Bind(1, n + 1).Run();
      });
      if (!s.ok()) {
        ++failures;
        ADD_FAILURE() << s.ToString();
      }
    }
  };
  std::thread a(bump, conns[0].get()), b(bump, conns[1].get());
  a.join();
  b.join();
  EXPECT_EQ(failures.load(), 0);
  auto q = OrDie(conns[1]->Prepare("SELECT n FROM counter"));
  ASSERT_TRUE(q.Step().value());
  EXPECT_EQ(q.Int(0), 2 * kEach);
}

TEST_P(DbTest, ControlPlanesMigratingTogetherApplyEachStepOnce) {
  const std::string url = NewDatabase();
  std::vector<std::thread> threads;
  std::atomic<int> ok{0};
  for (int i = 0; i < 3; ++i) {
    threads.emplace_back([&] {
      auto db = Db::Open(url);
      if (db.ok() && db.value()->Migrate(kSteps).ok()) ++ok;
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(ok.load(), 3);
  auto db = OpenDb(url);
  EXPECT_EQ(CountRows(*db, "schema_migrations"), 2);
  EXPECT_EQ(db->SchemaVersion().value(), 2);
}

}  // namespace
}  // namespace burst
