// The PostgreSQL backend of Db (db/db.h): one libpq connection to a server
// that several control planes may share.
//
// The URL is libpq's (postgresql://user:password@host:port/dbname?param=...;
// an empty host part lets libpq's PG* environment variables and its unix
// socket default apply). Burst adds connect_timeout=10 and
// application_name=burst unless the URL sets them, always speaks UTF-8, and
// sets lock_timeout to 5 s (SQLite's busy timeout). The database should be
// created with LC_COLLATE "C" (e.g. `createdb -l C -E UTF8 -T template0`):
// text then sorts byte-wise as in SQLite, so ties ordered by id come back in
// the same order on both.
//
// SQL: the shared dialect is rewritten by TranslateForPostgres (db/pg_sql.h)
// and prepared once per connection as a named server-side statement
// (Prepare reports a syntax error or a missing table, as SQLite's does);
// Exec drops them, since it may change the schema. Text cannot hold a NUL
// character on PostgreSQL: binding one fails the statement with
// kInvalidArgument.
//
// Transactions: BEGIN ISOLATION LEVEL READ COMMITTED, then
// pg_advisory_xact_lock(kWriterLock), held until COMMIT or ROLLBACK. Every
// Burst transaction on the database takes the same lock first, so they run
// one at a time, as under SQLite's BEGIN IMMEDIATE: a transaction that reads
// and then writes (an idempotent create, a migration, a leader lease's
// holder and expiry) cannot interleave with another control plane's. READ
// COMMITTED takes a snapshot per statement, after the lock is held, so each
// read sees every transaction committed before ours; a higher level would
// fix the snapshot while still waiting for the lock and read stale rows.
//
// A lost connection: the call that finds it broken fails kUnavailable
// (a statement may or may not have run, a COMMIT may or may not have
// committed, so nothing is replayed); the next call connects again, once.
// A connection the server closed while it was idle (a restart between two
// calls) is noticed before anything is sent and replaced at once. Inside a
// transaction nothing reconnects: the transaction fails and its rollback
// completes without the server, which discarded it.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "db/db.h"

struct pg_conn;
struct pg_result;

namespace burst {

// The advisory lock key every Burst transaction takes (ASCII "burst").
// Other applications on the same database must not use it.
inline constexpr int64_t kWriterLock = 0x6275727374;

class PgDb final : public Db {
 public:
  static Result<std::unique_ptr<Db>> Open(const std::string& url);
  ~PgDb() override;

  Backend backend() const override { return Backend::kPostgres; }
  Status Exec(const std::string& sql) override;
  Result<Stmt> Prepare(const std::string& sql) override;
  int64_t Changes() const override { return changes_; }
  std::string JsonText(std::string_view column, std::string_view key) const override;

 protected:
  Status Begin() override;
  Status Commit() override;
  Status Rollback() override;

 private:
  friend class PgStmt;
  struct Prepared {
    std::string name;  // the server-side statement
    int params = 0;
  };
  struct ResultDeleter {
    void operator()(pg_result* r) const;
  };
  using PgResult = std::unique_ptr<pg_result, ResultDeleter>;

  PgDb(std::string url, std::string shown, std::vector<std::string> secrets)
      : url_(std::move(url)), shown_(std::move(shown)), secrets_(std::move(secrets)) {}
  // (Re)connects: a new session, no prepared statements.
  Status Connect();
  // The connection to send the next command on: this one, or a new one when
  // it was lost outside a transaction (see the header comment).
  Status Ready();
  // The statement prepared for `sql` on this connection (prepared now when
  // new).
  Result<Prepared> Lookup(const std::string& sql);
  Status ForgetPrepared();
  // Runs the prepared statement for `sql` (preparing it again when the
  // connection changed since `*epoch`) with text parameters (null: NULL).
  Result<PgResult> RunPrepared(const std::string& sql, Prepared* p, uint64_t* epoch,
                               const std::vector<const char*>& values);
  // Simple-protocol command(s) without parameters.
  Result<PgResult> Simple(const std::string& sql, const std::string& shown_sql);
  // A command's result, or its error as a Status (db/pg_sql.h's codes;
  // kUnavailable whenever the connection is gone).
  Result<PgResult> Check(pg_result* raw, const std::string& sql);
  std::string Clean(const std::string& message) const;  // secrets scrubbed

  const std::string url_;                   // as given: holds the password, never shown
  const std::string shown_;                 // redacted, for messages
  const std::vector<std::string> secrets_;  // passwords to scrub from messages
  pg_conn* conn_ = nullptr;
  bool in_tx_ = false;  // the server holds a transaction open for us
  uint64_t epoch_ = 0;  // changes whenever prepared statements are dropped
  uint64_t next_name_ = 0;
  int64_t changes_ = 0;
  std::unordered_map<std::string, Prepared> prepared_;  // by the SQL given
};

}  // namespace burst
