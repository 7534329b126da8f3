// The metadata database: one connection (Db) and its prepared statements
// (Stmt), over two backends that run the same SQL, migrations and tests:
// SQLite (db/sqlite.h: a file, in process) and PostgreSQL (db/postgres.h:
// a server, shared by several control planes).
//
// SQL is written once, in the dialect both accept: `?` / `?N` placeholders,
// `INSERT ... ON CONFLICT (...) DO UPDATE SET c = excluded.c` (never INSERT
// OR REPLACE), RETURNING (never a last-insert rowid), no rowid, and in DDL
// the types TEXT, INTEGER, REAL and `INTEGER PRIMARY KEY AUTOINCREMENT`
// (the PostgreSQL backend rewrites placeholders and these types; see
// db/pg_sql.h). The few expressions the two spell differently come from the
// Db (JsonText). Integers are 64-bit on both.
//
// Db::Open picks the backend from the `database` setting: a file path or
// ":memory:" or `sqlite:///abs/path` is SQLite; `postgresql://...` or
// `postgres://...` (a libpq connection URI) is PostgreSQL. A password in the
// URL never appears in a message.
//
// Transaction runs a function inside one transaction that is serialized
// with every other writer's on the same database (SQLite: BEGIN IMMEDIATE;
// PostgreSQL: a transaction-scoped advisory lock taken first), so a
// read-then-write inside it sees the latest committed state and nobody
// else's write in between, whatever the number of control planes. A single
// statement outside Transaction is atomic on its own but not serialized
// with others. On PostgreSQL any failed statement aborts the enclosing
// transaction: return its error (the code always does).
//
// Migrate applies numbered schema steps once each, in order, each in its own
// transaction, and records them in `schema_migrations` (version, applied_at
// as "YYYY-MM-DD HH:MM:SS" UTC); a database newer than this binary is refused
// rather than misread. Control planes that start together apply each step
// once.
//
// Thread-safety: a Db is one connection; use it from one thread at a time
// (Metadata lends each connection of its pool to one call at a time). A Stmt must not
// outlive its Db.
// Errors: Status/Result. Busy, locked, serialization failures, deadlocks and
// lost connections are kUnavailable (retry); a unique-key violation is
// kAlreadyExists, any other constraint kFailedPrecondition; anything else
// kInternal; each with the backend's message and the statement's start.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace burst {

// A backend's prepared statement (what Stmt forwards to).
class StmtImpl {
 public:
  virtual ~StmtImpl() = default;
  virtual void Bind(int index, int64_t value) = 0;
  virtual void Bind(int index, double value) = 0;
  virtual void Bind(int index, const std::string& value) = 0;
  virtual void BindNull(int index) = 0;
  virtual Result<bool> Step() = 0;
  virtual void Reset() = 0;
  virtual int64_t Int(int col) const = 0;
  virtual double Real(int col) const = 0;
  virtual std::string Text(int col) const = 0;
  virtual bool IsNull(int col) const = 0;
};

class Stmt {
 public:
  explicit Stmt(std::unique_ptr<StmtImpl> impl) : impl_(std::move(impl)) {}
  Stmt(Stmt&& other) noexcept = default;
  Stmt& operator=(Stmt&&) = delete;

  // Parameters are 1-based (`?N` is parameter N; a bare `?` is one more
  // than the largest before it). An index the SQL has no parameter for is
  // ignored, as SQLite does.
  Stmt& Bind(int index, int64_t value) {
    impl_->Bind(index, value);
    return *this;
  }
  Stmt& Bind(int index, double value) {
    impl_->Bind(index, value);
    return *this;
  }
  Stmt& Bind(int index, const std::string& value) {
    impl_->Bind(index, value);
    return *this;
  }
  Stmt& BindNull(int index) {
    impl_->BindNull(index);
    return *this;
  }

  // Advances: true when a row is ready, false when done (the statement is
  // then ready to run again, bindings kept). SQLite: a statement that has
  // returned a row keeps its read snapshot until it is stepped to the end,
  // Reset or destroyed. PostgreSQL: the first Step runs the statement and
  // holds all of its rows.
  Result<bool> Step() { return impl_->Step(); }
  // Back to before the first row, bindings kept.
  void Reset() { impl_->Reset(); }
  // Runs to completion, ignoring rows.
  Status Run();

  // Columns of the current row, 0-based; NULL reads as 0, 0.0 or "".
  int64_t Int(int col) const { return impl_->Int(col); }
  double Real(int col) const { return impl_->Real(col); }
  std::string Text(int col) const { return impl_->Text(col); }
  bool IsNull(int col) const { return impl_->IsNull(col); }

 private:
  std::unique_ptr<StmtImpl> impl_;
};

enum class Backend { kSqlite, kPostgres };

class Db {
 public:
  // `url` as in the header comment. A malformed URL or an unknown scheme is
  // kInvalidArgument naming the `database` setting; a server that cannot be
  // reached or refuses the login is kUnavailable naming the URL (password
  // hidden).
  static Result<std::unique_ptr<Db>> Open(const std::string& url);
  virtual ~Db() = default;

  virtual Backend backend() const = 0;
  // One or more statements, no parameters (schema steps, tests).
  virtual Status Exec(const std::string& sql) = 0;
  virtual Result<Stmt> Prepare(const std::string& sql) = 0;
  // Rows changed by the last INSERT, UPDATE or DELETE.
  virtual int64_t Changes() const = 0;

  // The SQL expression for the text of the top-level field `key` of the
  // JSON text held in `column` (NULL when absent).
  virtual std::string JsonText(std::string_view column, std::string_view key) const = 0;

  // Runs fn inside one serialized transaction (header comment) and commits;
  // rolls back when fn returns an error status or throws.
  template <typename Fn>
  Status Transaction(Fn&& fn) {
    if (Status s = Begin(); !s.ok()) return s;
    Status s = Try([&] {
      Status inner = fn();
      if (!inner.ok()) throw Error(inner);
    });
    if (!s.ok()) {
      // A failed rollback leaves the connection inside the transaction:
      // the caller must hear of it with the error that caused it.
      if (Status r = Rollback(); !r.ok()) {
        return Status(s.code(), s.message() + " (and the rollback failed: " + r.message() + ")", s.param());
      }
      return s;
    }
    return Commit();
  }

  // Schema steps, numbered from 1 in vector order.
  Status Migrate(const std::vector<std::string>& steps);
  Result<int64_t> SchemaVersion();

 protected:
  Db() = default;
  virtual Status Begin() = 0;
  virtual Status Commit() = 0;
  virtual Status Rollback() = 0;
};

// The `database` setting with any password (user:PASSWORD@, password=...)
// replaced by "***", for messages and logs; `hidden` (when given) gets the
// texts replaced, for scrubbing them from other messages too.
std::string RedactDatabaseUrl(const std::string& url, std::vector<std::string>* hidden = nullptr);

}  // namespace burst
