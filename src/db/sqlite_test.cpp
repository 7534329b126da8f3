#include "db/sqlite.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include "core/fs.h"

namespace burst {
namespace {

std::unique_ptr<Db> OpenOrDie(const std::string& path) {
  auto r = Db::Open(path);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return std::move(r).value();
}

int64_t CountRows(Db& db, const std::string& table) {
  auto q = db.Prepare("SELECT COUNT(*) FROM " + table);
  EXPECT_TRUE(q.ok()) << q.status().ToString();
  EXPECT_TRUE(q.value().Step().value());
  return q.value().Int(0);
}

const std::vector<std::string> kSteps = {
    "CREATE TABLE t (id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE, note TEXT)",
    "ALTER TABLE t ADD COLUMN score REAL NOT NULL DEFAULT 0",
};

TEST(Sqlite, BindStepAndColumns) {
  auto db = OpenOrDie(":memory:");
  ASSERT_TRUE(db->Migrate(kSteps).ok());
  auto ins = db->Prepare("INSERT INTO t (name, note, score) VALUES (?, ?, ?)");
  ASSERT_TRUE(ins.ok());
  ASSERT_TRUE(ins.value().Bind(1, std::string("a\0b", 3)).BindNull(2).Bind(3, 2.5).Run().ok());
  EXPECT_EQ(db->LastInsertRowId(), 1);
  EXPECT_EQ(db->Changes(), 1);
  auto q = db->Prepare("SELECT id, name, note, score FROM t");
  ASSERT_TRUE(q.ok());
  ASSERT_TRUE(q.value().Step().value());
  EXPECT_EQ(q.value().Int(0), 1);
  EXPECT_EQ(q.value().Text(1), std::string("a\0b", 3));
  EXPECT_TRUE(q.value().IsNull(2));
  EXPECT_EQ(q.value().Real(3), 2.5);
  EXPECT_FALSE(q.value().Step().value());
}

TEST(Sqlite, ConstraintsMapToCodes) {
  auto db = OpenOrDie(":memory:");
  ASSERT_TRUE(db->Migrate(kSteps).ok());
  ASSERT_TRUE(db->Exec("INSERT INTO t (name) VALUES ('x')").ok());
  Status dup = db->Exec("INSERT INTO t (name) VALUES ('x')");
  EXPECT_EQ(dup.code(), Code::kAlreadyExists) << dup.ToString();
  Status null = db->Exec("INSERT INTO t (name) VALUES (NULL)");
  EXPECT_EQ(null.code(), Code::kFailedPrecondition) << null.ToString();
  EXPECT_EQ(db->Prepare("SELEC nonsense").status().code(), Code::kInternal);
}

TEST(Sqlite, MigrationsRunOnceAndInOrder) {
  fs::path dir = MakeTempDir("burst-db-test");
  std::string path = (dir / "meta.db").string();
  {
    auto db = OpenOrDie(path);
    ASSERT_TRUE(db->Migrate({kSteps[0]}).ok());
    EXPECT_EQ(db->SchemaVersion().value(), 1);
    ASSERT_TRUE(db->Exec("INSERT INTO t (name) VALUES ('kept')").ok());
  }
  {
    auto db = OpenOrDie(path);  // a newer binary: one more step
    ASSERT_TRUE(db->Migrate(kSteps).ok());
    ASSERT_TRUE(db->Migrate(kSteps).ok());  // again: nothing to do
    EXPECT_EQ(db->SchemaVersion().value(), 2);
    EXPECT_EQ(CountRows(*db, "t"), 1);
    EXPECT_EQ(CountRows(*db, "schema_migrations"), 2);
  }
  {
    auto db = OpenOrDie(path);  // an older binary must not touch it
    Status s = db->Migrate({kSteps[0]});
    EXPECT_EQ(s.code(), Code::kFailedPrecondition);
    EXPECT_NE(s.message().find("newer"), std::string::npos) << s.message();
  }
  fs::remove_all(dir);
}

TEST(Sqlite, FailedMigrationLeavesNothingHalfDone) {
  auto db = OpenOrDie(":memory:");
  Status s = db->Migrate({kSteps[0], "CREATE TABLE u (x INTEGER); CREATE TABLE broken ("});
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("schema migration 2"), std::string::npos) << s.message();
  EXPECT_EQ(db->SchemaVersion().value(), 1);
  EXPECT_FALSE(db->Prepare("SELECT * FROM u").ok());  // rolled back with its step
}

TEST(Sqlite, TransactionRollsBackOnError) {
  auto db = OpenOrDie(":memory:");
  ASSERT_TRUE(db->Migrate(kSteps).ok());
  Status s = db->Transaction([&]() -> Status {
    if (Status e = db->Exec("INSERT INTO t (name) VALUES ('gone')"); !e.ok()) return e;
    return Status(Code::kInvalidArgument, "changed my mind");
  });
  EXPECT_EQ(s.code(), Code::kInvalidArgument);
  EXPECT_EQ(CountRows(*db, "t"), 0);
  ASSERT_TRUE(db->Transaction([&] { return db->Exec("INSERT INTO t (name) VALUES ('kept')"); }).ok());
  EXPECT_EQ(CountRows(*db, "t"), 1);
}

TEST(Sqlite, TwoConnectionsShareAWalDatabase) {
  fs::path dir = MakeTempDir("burst-db-test");
  std::string path = (dir / "meta.db").string();
  auto writer = OpenOrDie(path);
  auto reader = OpenOrDie(path);
  ASSERT_TRUE(writer->Migrate(kSteps).ok());
  {
    auto mode = reader->Prepare("PRAGMA journal_mode");
    ASSERT_TRUE(mode.ok() && mode.value().Step().value());
    EXPECT_EQ(mode.value().Text(0), "wal");
  }  // a statement mid-way through its rows holds a read snapshot until reset or destroyed
  ASSERT_TRUE(writer->Exec("BEGIN IMMEDIATE; INSERT INTO t (name) VALUES ('w');").ok());
  EXPECT_EQ(CountRows(*reader, "t"), 0);  // a reader is not blocked by an open write
  ASSERT_TRUE(writer->Exec("COMMIT").ok());
  EXPECT_EQ(CountRows(*reader, "t"), 1);
  fs::remove_all(dir);
}

unsigned Mode(const fs::path& p) {
  struct stat st {};
  EXPECT_EQ(::stat(p.c_str(), &st), 0) << p;
  return st.st_mode & 07777;
}

// The database, its write-ahead log and its shared-memory index are the
// server user's only, whatever the umask of whoever starts it.
TEST(Sqlite, TheDatabaseAndItsWalAreItsOwnersOnly) {
  const mode_t old = ::umask(022);
  fs::path dir = MakeTempDir("burst-sqlite-test");
  const std::string path = (dir / "meta.db").string();
  {
    auto db = OpenOrDie(path);
    ASSERT_TRUE(db->Migrate(kSteps).ok());
    ASSERT_TRUE(db->Exec("INSERT INTO t (name) VALUES ('secret')").ok());
    for (const char* suffix : {"", "-wal", "-shm"}) EXPECT_EQ(Mode(path + suffix), 0600u) << suffix;
  }
  ::umask(old);
  fs::remove_all(dir);
}

TEST(Sqlite, ALooserDatabaseIsTightenedWhenOpened) {
  fs::path dir = MakeTempDir("burst-sqlite-test");
  const std::string path = (dir / "meta.db").string();
  {
    auto db = OpenOrDie(path);
    ASSERT_TRUE(db->Migrate(kSteps).ok());
    for (const char* suffix : {"", "-wal", "-shm"}) fs::permissions(path + suffix, fs::perms(0644));
  }
  fs::permissions(path, fs::perms(0644));  // an earlier version's file
  testing::internal::CaptureStderr();
  {
    auto db = OpenOrDie(path);
    EXPECT_EQ(CountRows(*db, "t"), 0);
    for (const char* suffix : {"", "-wal", "-shm"}) {
      if (fs::exists(path + suffix)) {
        EXPECT_EQ(Mode(path + suffix), 0600u) << suffix;
      }
    }
  }
  const std::string err = testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find(path + " had mode 0644"), std::string::npos) << err;
  fs::remove_all(dir);
}

}  // namespace
}  // namespace burst
