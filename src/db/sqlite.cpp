#include "db/sqlite.h"

#include <fcntl.h>
#include <sqlite3.h>
#include <unistd.h>

#include <cerrno>

#include "core/fs.h"

namespace burst {
namespace {

Status SqliteError(sqlite3* db, int rc, const std::string& sql) {
  Code code = Code::kInternal;
  int primary = rc & 0xff;
  if (primary == SQLITE_BUSY || primary == SQLITE_LOCKED) code = Code::kUnavailable;
  if (primary == SQLITE_CONSTRAINT) {
    code = (rc == SQLITE_CONSTRAINT_UNIQUE || rc == SQLITE_CONSTRAINT_PRIMARYKEY) ? Code::kAlreadyExists
                                                                                  : Code::kFailedPrecondition;
  }
  std::string msg = db ? sqlite3_errmsg(db) : sqlite3_errstr(rc);
  return Status(code, "sqlite: " + msg + " (in: " + sql.substr(0, 80) + ")");
}

class SqliteStmt final : public StmtImpl {
 public:
  SqliteStmt(sqlite3* db, sqlite3_stmt* stmt, std::string sql) : db_(db), stmt_(stmt), sql_(std::move(sql)) {}
  ~SqliteStmt() override { sqlite3_finalize(stmt_); }

  void Bind(int index, int64_t value) override { sqlite3_bind_int64(stmt_, index, value); }
  void Bind(int index, double value) override { sqlite3_bind_double(stmt_, index, value); }
  void Bind(int index, const std::string& value) override {
    sqlite3_bind_text(stmt_, index, value.data(), static_cast<int>(value.size()), SQLITE_TRANSIENT);
  }
  void BindNull(int index) override { sqlite3_bind_null(stmt_, index); }

  Result<bool> Step() override {
    int rc = sqlite3_step(stmt_);
    if (rc == SQLITE_ROW) return true;
    if (rc == SQLITE_DONE) {
      sqlite3_reset(stmt_);  // ends its read snapshot now, not at destruction
      return false;
    }
    return SqliteError(db_, sqlite3_extended_errcode(db_), sql_);
  }
  void Reset() override { sqlite3_reset(stmt_); }

  int64_t Int(int col) const override { return sqlite3_column_int64(stmt_, col); }
  double Real(int col) const override { return sqlite3_column_double(stmt_, col); }
  std::string Text(int col) const override {
    const unsigned char* p = sqlite3_column_text(stmt_, col);
    int n = sqlite3_column_bytes(stmt_, col);
    return p ? std::string(reinterpret_cast<const char*>(p), static_cast<size_t>(n)) : std::string();
  }
  bool IsNull(int col) const override { return sqlite3_column_type(stmt_, col) == SQLITE_NULL; }

 private:
  sqlite3* db_;
  sqlite3_stmt* stmt_;
  std::string sql_;
};

// The database holds every organisation's records and API key hashes.
// SQLite creates -wal and -shm with the database file's own permissions, so
// the file is created 0600 before SQLite opens it; files an earlier version
// left looser are tightened. An existing file is never opened here: closing
// a descriptor drops every POSIX lock this process holds on the file, the
// locks SQLite's other connections rely on (another process would then
// take the WAL from under them, and they would read a stale database).
Status MakePrivate(const std::string& path) {
  if (path.empty() || path == ":memory:" || path.rfind("file:", 0) == 0) return Status();
  int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd >= 0)
    ::close(fd);  // new: no connection of ours can hold a lock on it yet
  else if (errno != EEXIST)
    return IoStatus(errno, "cannot open database", path, Code::kUnavailable);
  return Try([&] {
    for (const char* suffix : {"", "-wal", "-shm"}) RestrictMode(path + suffix, 0600);
  });
}

}  // namespace

Result<std::unique_ptr<Db>> SqliteDb::Open(const std::string& path) {
  if (Status s = MakePrivate(path); !s.ok()) return s;
  sqlite3* raw = nullptr;
  int rc = sqlite3_open_v2(path.c_str(), &raw,
                           SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, nullptr);
  if (rc != SQLITE_OK) {
    Status s(Code::kUnavailable,
             "cannot open database " + path + ": " + (raw ? sqlite3_errmsg(raw) : sqlite3_errstr(rc)),
             "database");
    sqlite3_close(raw);
    return s;
  }
  std::unique_ptr<SqliteDb> db(new SqliteDb(raw));
  sqlite3_busy_timeout(raw, 5000);
  // WAL: readers never block the writer; synchronous=FULL: a committed
  // transaction survives power loss, which the control plane promises.
  for (const char* pragma :
       {"PRAGMA journal_mode=WAL", "PRAGMA synchronous=FULL", "PRAGMA foreign_keys=ON"}) {
    if (Status s = db->Exec(pragma); !s.ok()) return s;
  }
  // WAL mode has just created -wal and -shm: with the file's permissions,
  // unless they were there, looser, from before.
  if (Status s = MakePrivate(path); !s.ok()) return s;
  return std::unique_ptr<Db>(std::move(db));
}

SqliteDb::~SqliteDb() { sqlite3_close(db_); }

Status SqliteDb::Exec(const std::string& sql) {
  char* err = nullptr;
  int rc = sqlite3_exec(db_, sql.c_str(), nullptr, nullptr, &err);
  if (err) sqlite3_free(err);
  if (rc != SQLITE_OK) return SqliteError(db_, sqlite3_extended_errcode(db_), sql);
  return Status();
}

Result<Stmt> SqliteDb::Prepare(const std::string& sql) {
  sqlite3_stmt* stmt = nullptr;
  int rc = sqlite3_prepare_v2(db_, sql.c_str(), static_cast<int>(sql.size()), &stmt, nullptr);
  if (rc != SQLITE_OK) return SqliteError(db_, rc, sql);
  return Stmt(std::make_unique<SqliteStmt>(db_, stmt, sql));
}

int64_t SqliteDb::Changes() const { return sqlite3_changes64(db_); }

std::string SqliteDb::JsonText(std::string_view column, std::string_view key) const {
  return "json_extract(" + std::string(column) + ", '$." + std::string(key) + "')";
}

}  // namespace burst
