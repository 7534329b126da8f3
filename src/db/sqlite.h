// A thin RAII layer over SQLite: one connection (Db) and its prepared
// statements (Stmt), plus schema migrations.
//
// Db::Open turns on WAL (readers never block the writer), foreign keys and a
// busy timeout, so several processes can share one database file. The file
// and its -wal/-shm companions are the server user's only (0600), whatever
// the umask: a database created looser earlier is tightened when opened.
// Migrate applies numbered schema steps once each, in order, each in its own
// transaction, and records them in `schema_migrations`; a database newer than
// this binary is refused rather than misread.
//
// Thread-safety: a Db is one connection; use it from one thread at a time
// (the control plane guards its connection with a mutex).
// Errors: Status/Result; SQLITE_BUSY/LOCKED map to kUnavailable (retry),
// constraint violations to kAlreadyExists or kFailedPrecondition, anything
// else to kInternal, each with SQLite's message and the statement's start.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/status.h"

struct sqlite3;
struct sqlite3_stmt;

namespace burst {

class Stmt {
 public:
  Stmt(Stmt&& other) noexcept;
  Stmt& operator=(Stmt&&) = delete;
  ~Stmt();

  // Parameters are 1-based, as in SQLite.
  Stmt& Bind(int index, int64_t value);
  Stmt& Bind(int index, double value);
  Stmt& Bind(int index, const std::string& value);
  Stmt& BindNull(int index);

  // Advances: true when a row is ready, false when done. A statement that
  // has returned a row keeps its read snapshot (newer commits stay invisible
  // to this connection) until it is stepped to the end, Reset or destroyed.
  Result<bool> Step();
  // Back to before the first row, bindings kept.
  void Reset();
  // Runs to completion, ignoring rows.
  Status Run();

  int64_t Int(int col) const;
  double Real(int col) const;
  std::string Text(int col) const;
  bool IsNull(int col) const;

 private:
  friend class Db;
  Stmt(sqlite3* db, sqlite3_stmt* stmt, std::string sql);
  sqlite3* db_;
  sqlite3_stmt* stmt_;
  std::string sql_;
};

class Db {
 public:
  // path ":memory:" gives a private in-memory database.
  static Result<std::unique_ptr<Db>> Open(const std::string& path);
  ~Db();

  Status Exec(const std::string& sql);  // one or more statements, no parameters
  Result<Stmt> Prepare(const std::string& sql);
  int64_t LastInsertRowId() const;
  int64_t Changes() const;

  // Runs fn inside BEGIN IMMEDIATE ... COMMIT; rolls back when fn returns an
  // error status or throws.
  template <typename Fn>
  Status Transaction(Fn&& fn) {
    if (Status s = Exec("BEGIN IMMEDIATE"); !s.ok()) return s;
    Status s = Try([&] {
      Status inner = fn();
      if (!inner.ok()) throw Error(inner);
    });
    if (!s.ok()) {
      // A failed rollback leaves the connection inside the transaction:
      // the caller must hear of it with the error that caused it.
      if (Status r = Exec("ROLLBACK"); !r.ok()) {
        return Status(s.code(), s.message() + " (and the rollback failed: " + r.message() + ")", s.param());
      }
      return s;
    }
    return Exec("COMMIT");
  }

  // Schema steps, numbered from 1 in vector order.
  Status Migrate(const std::vector<std::string>& steps);
  Result<int64_t> SchemaVersion();

 private:
  explicit Db(sqlite3* db) : db_(db) {}
  sqlite3* db_;
};

}  // namespace burst
