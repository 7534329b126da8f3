// What is SQLite's alone: its files (WAL, modes, bytes), text with NUL
// characters, sqlite:// URLs. The shared suites run on both backends
// (test_backend.h).
#include "db/sqlite.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include "core/fs.h"
#include "db/metadata.h"

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

TEST(Sqlite, TextMayHoldNulCharacters) {
  auto db = OpenOrDie(":memory:");
  ASSERT_EQ(db->backend(), Backend::kSqlite);
  ASSERT_TRUE(db->Migrate(kSteps).ok());
  auto ins = db->Prepare("INSERT INTO t (name) VALUES (?)");
  ASSERT_TRUE(ins.ok());
  ASSERT_TRUE(ins.value().Bind(1, std::string("a\0b", 3)).Run().ok());
  auto q = db->Prepare("SELECT name FROM t");
  ASSERT_TRUE(q.ok() && q.value().Step().value());
  EXPECT_EQ(q.value().Text(0), std::string("a\0b", 3));
}

TEST(Sqlite, UrlsNameTheFile) {
  fs::path dir = MakeTempDir("burst-db-test");
  const std::string path = (dir / "meta.db").string();
  {
    auto db = OpenOrDie("sqlite://" + path);
    ASSERT_TRUE(db->Migrate(kSteps).ok());
  }
  EXPECT_TRUE(fs::exists(path));
  EXPECT_EQ(OpenOrDie(path)->SchemaVersion().value(), 2);
  fs::remove_all(dir);
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

// A key's secret is nowhere in the database's files, its hash is.
TEST(Sqlite, AnApiKeysSecretIsNotInTheFiles) {
  fs::path dir = MakeTempDir("burst-meta-test");
  const std::string path = (dir / "meta.db").string();
  std::string secret;
  {
    auto md = Metadata::Open(path);
    ASSERT_TRUE(md.ok()) << md.status().ToString();
    auto org = md.value()->CreateOrg("acme");
    ASSERT_TRUE(org.ok());
    auto key = md.value()->CreateApiKey(org.value().id, "admin");
    ASSERT_TRUE(key.ok());
    secret = key.value().secret;
  }
  std::string bytes;
  for (const auto& e : fs::directory_iterator(dir)) bytes += ReadFile(e.path());
  EXPECT_EQ(bytes.find(secret), std::string::npos);
  EXPECT_NE(bytes.find(Sha256Hex(secret)), std::string::npos);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace burst
