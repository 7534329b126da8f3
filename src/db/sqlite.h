// The SQLite backend of Db (db/db.h): one connection to a database file.
//
// Open turns on WAL (readers never block the writer), synchronous=FULL (a
// committed transaction survives power loss), foreign keys and a 5 s busy
// timeout, so several processes can share one file. The file and its
// -wal/-shm companions are the server user's only (0600), whatever the
// umask: a database created looser earlier is tightened when opened.
// Transactions are BEGIN IMMEDIATE: the write lock is taken first, so
// writers are serialized and a transaction never fails half-way on a lock.
//
// Errors: SQLITE_BUSY/LOCKED map to kUnavailable (retry), constraint
// violations to kAlreadyExists (unique, primary key) or kFailedPrecondition,
// anything else to kInternal, each with SQLite's message and the statement's
// start.
#pragma once

#include <memory>
#include <string>

#include "db/db.h"

struct sqlite3;

namespace burst {

class SqliteDb final : public Db {
 public:
  // `path`: a file (created when missing) or ":memory:" (private, in memory).
  static Result<std::unique_ptr<Db>> Open(const std::string& path);
  ~SqliteDb() override;

  Backend backend() const override { return Backend::kSqlite; }
  Status Exec(const std::string& sql) override;
  Result<Stmt> Prepare(const std::string& sql) override;
  int64_t Changes() const override;
  std::string JsonText(std::string_view column, std::string_view key) const override;

 protected:
  Status Begin() override { return Exec("BEGIN IMMEDIATE"); }
  Status Commit() override { return Exec("COMMIT"); }
  Status Rollback() override { return Exec("ROLLBACK"); }

 private:
  explicit SqliteDb(sqlite3* db) : db_(db) {}
  sqlite3* db_;
};

}  // namespace burst
