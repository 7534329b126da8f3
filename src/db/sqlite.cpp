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
    code = (rc == SQLITE_CONSTRAINT_UNIQUE || rc == SQLITE_CONSTRAINT_PRIMARYKEY)
               ? Code::kAlreadyExists
               : Code::kFailedPrecondition;
  }
  std::string msg = db ? sqlite3_errmsg(db) : sqlite3_errstr(rc);
  return Status(code, "sqlite: " + msg + " (in: " + sql.substr(0, 80) + ")");
}

}  // namespace

// ----------------------------------------------------------------------------
// Stmt

Stmt::Stmt(sqlite3* db, sqlite3_stmt* stmt, std::string sql)
    : db_(db), stmt_(stmt), sql_(std::move(sql)) {}

Stmt::Stmt(Stmt&& other) noexcept : db_(other.db_), stmt_(other.stmt_), sql_(std::move(other.sql_)) {
  other.stmt_ = nullptr;
}

Stmt::~Stmt() {
  if (stmt_) sqlite3_finalize(stmt_);
}

Stmt& Stmt::Bind(int index, int64_t value) {
  sqlite3_bind_int64(stmt_, index, value);
  return *this;
}
Stmt& Stmt::Bind(int index, double value) {
  sqlite3_bind_double(stmt_, index, value);
  return *this;
}
Stmt& Stmt::Bind(int index, const std::string& value) {
  sqlite3_bind_text(stmt_, index, value.data(), static_cast<int>(value.size()), SQLITE_TRANSIENT);
  return *this;
}
Stmt& Stmt::BindNull(int index) {
  sqlite3_bind_null(stmt_, index);
  return *this;
}

Result<bool> Stmt::Step() {
  int rc = sqlite3_step(stmt_);
  if (rc == SQLITE_ROW) return true;
  if (rc == SQLITE_DONE) {
    sqlite3_reset(stmt_);  // ends its read snapshot now, not at destruction
    return false;
  }
  return SqliteError(db_, sqlite3_extended_errcode(db_), sql_);
}

void Stmt::Reset() { sqlite3_reset(stmt_); }

Status Stmt::Run() {
  for (;;) {
    Result<bool> r = Step();
    if (!r.ok()) return r.status();
    if (!r.value()) return Status();
  }
}

int64_t Stmt::Int(int col) const { return sqlite3_column_int64(stmt_, col); }
double Stmt::Real(int col) const { return sqlite3_column_double(stmt_, col); }
std::string Stmt::Text(int col) const {
  const unsigned char* p = sqlite3_column_text(stmt_, col);
  int n = sqlite3_column_bytes(stmt_, col);
  return p ? std::string(reinterpret_cast<const char*>(p), static_cast<size_t>(n)) : std::string();
}
bool Stmt::IsNull(int col) const { return sqlite3_column_type(stmt_, col) == SQLITE_NULL; }

// ----------------------------------------------------------------------------
// Db

namespace {
// The database holds every organisation's records and API key hashes.
// SQLite creates -wal and -shm with the database file's own permissions, so
// the file is created 0600 before SQLite opens it; files an earlier version
// left looser are tightened.
Status MakePrivate(const std::string& path) {
  if (path.empty() || path == ":memory:" || path.rfind("file:", 0) == 0) return Status();
  int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (fd < 0) return IoStatus(errno, "cannot open database", path, Code::kUnavailable);
  ::close(fd);
  return Try([&] {
    for (const char* suffix : {"", "-wal", "-shm"}) RestrictMode(path + suffix, 0600);
  });
}
}  // namespace

Result<std::unique_ptr<Db>> Db::Open(const std::string& path) {
  if (Status s = MakePrivate(path); !s.ok()) return s;
  sqlite3* raw = nullptr;
  int rc = sqlite3_open_v2(path.c_str(), &raw,
                           SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, nullptr);
  if (rc != SQLITE_OK) {
    Status s(Code::kUnavailable,
             "cannot open database " + path + ": " + (raw ? sqlite3_errmsg(raw) : sqlite3_errstr(rc)),
             path);
    sqlite3_close(raw);
    return s;
  }
  std::unique_ptr<Db> db(new Db(raw));
  sqlite3_busy_timeout(raw, 5000);
  // WAL: readers never block the writer; synchronous=FULL: a committed
  // transaction survives power loss, which the control plane promises.
  for (const char* pragma : {"PRAGMA journal_mode=WAL", "PRAGMA synchronous=FULL",
                             "PRAGMA foreign_keys=ON"}) {
    if (Status s = db->Exec(pragma); !s.ok()) return s;
  }
  // WAL mode has just created -wal and -shm: with the file's permissions,
  // unless they were there, looser, from before.
  if (Status s = MakePrivate(path); !s.ok()) return s;
  return db;
}

Db::~Db() { sqlite3_close(db_); }

Status Db::Exec(const std::string& sql) {
  char* err = nullptr;
  int rc = sqlite3_exec(db_, sql.c_str(), nullptr, nullptr, &err);
  if (err) sqlite3_free(err);
  if (rc != SQLITE_OK) return SqliteError(db_, sqlite3_extended_errcode(db_), sql);
  return Status();
}

Result<Stmt> Db::Prepare(const std::string& sql) {
  sqlite3_stmt* stmt = nullptr;
  int rc = sqlite3_prepare_v2(db_, sql.c_str(), static_cast<int>(sql.size()), &stmt, nullptr);
  if (rc != SQLITE_OK) return SqliteError(db_, rc, sql);
  return Stmt(db_, stmt, sql);
}

int64_t Db::LastInsertRowId() const { return sqlite3_last_insert_rowid(db_); }
int64_t Db::Changes() const { return sqlite3_changes64(db_); }

Result<int64_t> Db::SchemaVersion() {
  if (Status s = Exec("CREATE TABLE IF NOT EXISTS schema_migrations ("
                      "version INTEGER PRIMARY KEY, applied_at TEXT NOT NULL)");
      !s.ok()) {
    return s;
  }
  Result<Stmt> q = Prepare("SELECT COALESCE(MAX(version), 0) FROM schema_migrations");
  if (!q.ok()) return q.status();
  Result<bool> row = q.value().Step();
  if (!row.ok()) return row.status();
  return q.value().Int(0);
}

Status Db::Migrate(const std::vector<std::string>& steps) {
  Result<int64_t> have = SchemaVersion();
  if (!have.ok()) return have.status();
  const auto known = static_cast<int64_t>(steps.size());
  if (have.value() > known) {
    return Status(Code::kFailedPrecondition,
                  "database schema version " + std::to_string(have.value()) +
                      " is newer than this burst knows (" + std::to_string(known) +
                      "): upgrade burst before opening it");
  }
  for (int64_t v = have.value() + 1; v <= known; ++v) {
    Status s = Transaction([&]() -> Status {
      if (Status e = Exec(steps[static_cast<size_t>(v - 1)]); !e.ok()) return e;
      Result<Stmt> ins = Prepare(
          "INSERT INTO schema_migrations (version, applied_at) VALUES (?, datetime('now'))");
      if (!ins.ok()) return ins.status();
      return ins.value().Bind(1, v).Run();
    });
    if (!s.ok()) {
      return Status(s.code(), "schema migration " + std::to_string(v) + " failed: " + s.message());
    }
  }
  return Status();
}

}  // namespace burst
