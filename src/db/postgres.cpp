#include "db/postgres.h"

#include <libpq-fe.h>
#include <poll.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>

#include "db/pg_sql.h"

namespace burst {
namespace {

// Prepared statements kept per connection before all are dropped (the
// code's SQL is a few dozen texts; this bounds a caller that builds many).
constexpr size_t kMaxPrepared = 512;

// Type oids (PostgreSQL's catalog/pg_type.h, stable since 1996).
constexpr Oid kInt2 = 21, kInt4 = 23, kInt8 = 20, kFloat4 = 700, kFloat8 = 701;

std::string Trim(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s;
}

bool StartsWith(const char* s, const char* prefix) {
  return std::strncmp(s, prefix, std::strlen(prefix)) == 0;
}

// A double as PostgreSQL's float8 input reads it back exactly.
std::string DoubleText(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "Infinity" : "-Infinity";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
}

}  // namespace

void PgDb::ResultDeleter::operator()(pg_result* r) const { PQclear(r); }

// ----------------------------------------------------------------------------
// PgStmt: parameters kept as text until the first Step runs the statement;
// then every row is held in the PGresult.

class PgStmt final : public StmtImpl {
 public:
  PgStmt(PgDb* db, std::string sql, PgDb::Prepared p, uint64_t epoch)
      : db_(db),
        sql_(std::move(sql)),
        p_(std::move(p)),
        epoch_(epoch),
        values_(static_cast<size_t>(p_.params)) {}

  void Bind(int index, int64_t value) override { Set(index, std::to_string(value)); }
  void Bind(int index, double value) override { Set(index, DoubleText(value)); }
  void Bind(int index, const std::string& value) override { Set(index, value); }
  void BindNull(int index) override { Set(index, std::nullopt); }

  Result<bool> Step() override {
    if (!res_) {
      std::vector<const char*> raw(values_.size(), nullptr);
      for (size_t i = 0; i < values_.size(); ++i) {
        if (!values_[i]) continue;
        if (values_[i]->find('\0') != std::string::npos) {
          return Status(Code::kInvalidArgument,
                        "postgresql: parameter " + std::to_string(i + 1) +
                            " holds a NUL character, which PostgreSQL text cannot store (in: " +
                            sql_.substr(0, 80) + ")");
        }
        raw[i] = values_[i]->c_str();
      }
      auto r = db_->RunPrepared(sql_, &p_, &epoch_, raw);
      if (!r.ok()) return r.status();
      res_ = std::move(r).value();
      row_ = -1;
    }
    if (++row_ < PQntuples(res_.get())) return true;
    res_.reset();
    return false;
  }
  void Reset() override { res_.reset(); }

  int64_t Int(int col) const override {
    const char* v = Value(col);
    if (!v) return 0;
    if (v[0] == 't' && v[1] == '\0') return 1;  // a boolean
    return std::strtoll(v, nullptr, 10);
  }
  double Real(int col) const override {
    const char* v = Value(col);
    return v ? std::strtod(v, nullptr) : 0.0;
  }
  std::string Text(int col) const override {
    const char* v = Value(col);
    return v ? std::string(v, static_cast<size_t>(PQgetlength(res_.get(), row_, col))) : std::string();
  }
  bool IsNull(int col) const override { return Value(col) == nullptr; }

 private:
  void Set(int index, std::optional<std::string> value) {
    res_.reset();  // new parameters: the next Step runs the statement again
    if (index < 1 || index > static_cast<int>(values_.size())) return;  // as SQLite: ignored
    values_[static_cast<size_t>(index - 1)] = std::move(value);
  }
  // The current row's column, or null (no row, no such column, or NULL).
  const char* Value(int col) const {
    if (!res_ || row_ < 0 || row_ >= PQntuples(res_.get()) || col < 0 || col >= PQnfields(res_.get()))
      return nullptr;
    if (PQgetisnull(res_.get(), row_, col)) return nullptr;
    return PQgetvalue(res_.get(), row_, col);
  }

  PgDb* db_;
  std::string sql_;
  PgDb::Prepared p_;
  uint64_t epoch_;
  std::vector<std::optional<std::string>> values_;
  PgDb::PgResult res_;
  int row_ = -1;
};

// ----------------------------------------------------------------------------
// PgDb

Result<std::unique_ptr<Db>> PgDb::Open(const std::string& url) {
  std::vector<std::string> secrets;
  const std::string shown = RedactDatabaseUrl(url, &secrets);
  char* err = nullptr;
  PQconninfoOption* opts = PQconninfoParse(url.c_str(), &err);
  if (!opts) {
    std::string why = err ? Trim(err) : "out of memory";
    PQfreemem(err);
    for (const auto& s : secrets) why = Scrub(why, s);
    return Status(Code::kInvalidArgument, "database: not a valid PostgreSQL URL (\"" + shown + "\"): " + why,
                  "database");
  }
  for (PQconninfoOption* o = opts; o->keyword; ++o) {
    if (std::strcmp(o->keyword, "password") == 0 && o->val && *o->val) secrets.push_back(o->val);
  }
  PQconninfoFree(opts);
  std::unique_ptr<PgDb> db(new PgDb(url, shown, std::move(secrets)));
  if (Status s = db->Connect(); !s.ok()) return s;
  return std::unique_ptr<Db>(std::move(db));
}

PgDb::~PgDb() {
  if (conn_) PQfinish(conn_);
}

std::string PgDb::Clean(const std::string& message) const {
  std::string out = Trim(message);
  for (const auto& s : secrets_) out = Scrub(out, s);
  return out;
}

Status PgDb::Connect() {
  if (conn_) PQfinish(conn_);
  conn_ = nullptr;
  in_tx_ = false;
  prepared_.clear();
  ++epoch_;
  // Keywords before dbname (the URL) are defaults the URL may override;
  // those after it are Burst's own.
  const char* keys[] = {"connect_timeout", "application_name", "dbname", "client_encoding", nullptr};
  const char* vals[] = {"10", "burst", url_.c_str(), "UTF8", nullptr};
  PGconn* c = PQconnectdbParams(keys, vals, /*expand_dbname=*/1);
  if (!c)
    return Status(Code::kResourceExhausted, "cannot connect to database " + shown_ + ": out of memory",
                  "database");
  if (PQstatus(c) != CONNECTION_OK) {
    const std::string why = Clean(PQerrorMessage(c));
    PQfinish(c);
    return Status(Code::kUnavailable, "cannot connect to database " + shown_ + ": " + why, "database");
  }
  // Notices ("relation already exists, skipping") are not errors: dropped.
  PQsetNoticeProcessor(
      c, [](void*, const char*) {}, nullptr);
  conn_ = c;
  auto r = Simple("SET lock_timeout = 5000", "SET lock_timeout");
  return r.status();
}

Status PgDb::Ready() {
  if (conn_ && PQstatus(conn_) == CONNECTION_OK) {
    if (in_tx_) return Status();
    // Closed by the server while idle (a restart): readable, holding its
    // last words (a FATAL notice, read and parsed away here), then the end.
    // Nothing was sent, so connecting again is safe.
    bool lost = false;
    for (int i = 0; i < 4 && !lost; ++i) {
      pollfd p{PQsocket(conn_), POLLIN, 0};
      if (::poll(&p, 1, 0) <= 0) break;
      lost = PQconsumeInput(conn_) == 0 || PQstatus(conn_) != CONNECTION_OK;
      if (!lost) (void)PQisBusy(conn_);  // parses what came
    }
    if (!lost) return Status();
  }
  if (in_tx_) {
    in_tx_ = false;  // the server discarded it; the next call connects again
    return Status(
        Code::kUnavailable,
        "postgresql: lost the connection to " + shown_ + " inside a transaction, which was discarded",
        "database");
  }
  return Connect();
}

Result<PgDb::PgResult> PgDb::Check(pg_result* raw, const std::string& sql) {
  PgResult res(raw);
  const ExecStatusType st = raw ? PQresultStatus(raw) : PGRES_FATAL_ERROR;
  const bool connected = conn_ && PQstatus(conn_) == CONNECTION_OK;
  if (connected) in_tx_ = PQtransactionStatus(conn_) != PQTRANS_IDLE;
  if (st == PGRES_COMMAND_OK || st == PGRES_TUPLES_OK || st == PGRES_EMPTY_QUERY) {
    const char* cmd = PQcmdStatus(raw);
    if (StartsWith(cmd, "INSERT") || StartsWith(cmd, "UPDATE") || StartsWith(cmd, "DELETE") ||
        StartsWith(cmd, "MERGE")) {
      changes_ = std::strtoll(PQcmdTuples(raw), nullptr, 10);
    }
    return res;
  }
  const char* state = raw ? PQresultErrorField(raw, PG_DIAG_SQLSTATE) : nullptr;
  const char* primary = raw ? PQresultErrorField(raw, PG_DIAG_MESSAGE_PRIMARY) : nullptr;
  std::string msg = primary && *primary ? primary : (conn_ ? PQerrorMessage(conn_) : "no connection");
  Code code = state ? CodeForSqlState(state) : Code::kInternal;
  if (!connected) {
    // Whatever transaction there was is gone with the connection; a caller
    // ending it hears so now, and the next call connects again.
    if (sql == "COMMIT" || sql == "ROLLBACK") in_tx_ = false;
    code = Code::kUnavailable;
    msg = "lost the connection to " + shown_ + ": " + msg;
  } else if (st != PGRES_FATAL_ERROR && st != PGRES_NONFATAL_ERROR) {
    msg = std::string("unexpected result ") + PQresStatus(st);
  }
  return Status(code, "postgresql: " + Clean(msg) + " (in: " + sql.substr(0, 80) + ")");
}

Result<PgDb::PgResult> PgDb::Simple(const std::string& sql, const std::string& shown_sql) {
  if (Status s = Ready(); !s.ok()) return s;
  return Check(PQexec(conn_, sql.c_str()), shown_sql);
}

Status PgDb::ForgetPrepared() {
  if (prepared_.empty()) return Status();
  prepared_.clear();
  ++epoch_;
  return Check(PQexec(conn_, "DEALLOCATE ALL"), "DEALLOCATE ALL").status();
}

Status PgDb::Exec(const std::string& sql) {
  int params = 0;
  auto r = Simple(TranslateForPostgres(sql, &params), sql);
  if (!r.ok()) return r.status();
  // It may have changed the schema: statements are prepared again.
  return ForgetPrepared();
}

Result<PgDb::Prepared> PgDb::Lookup(const std::string& sql) {
  if (Status s = Ready(); !s.ok()) return s;
  if (auto it = prepared_.find(sql); it != prepared_.end()) return it->second;
  if (prepared_.size() >= kMaxPrepared) {
    if (Status s = ForgetPrepared(); !s.ok()) return s;
  }
  Prepared p;
  const std::string translated = TranslateForPostgres(sql, &p.params);
  p.name = "burst_" + std::to_string(++next_name_);
  auto r = Check(PQprepare(conn_, p.name.c_str(), translated.c_str(), 0, nullptr), sql);
  if (!r.ok()) return r.status();
  // PostgreSQL infers each parameter's type from its context: `?2 = 0`
  // makes it a 32-bit integer, and `?2 * 1000` would then overflow where
  // SQLite computes in 64 bits. Parameters inferred narrower are prepared
  // again as bigint / double precision.
  auto d = Check(PQdescribePrepared(conn_, p.name.c_str()), sql);
  if (!d.ok()) return d.status();
  p.params = PQnparams(d.value().get());
  std::vector<Oid> types(static_cast<size_t>(p.params));
  bool widen = false;
  for (int i = 0; i < p.params; ++i) {
    Oid t = PQparamtype(d.value().get(), i);
    if (t == kInt2 || t == kInt4) t = kInt8;
    if (t == kFloat4) t = kFloat8;
    widen |= t != PQparamtype(d.value().get(), i);
    types[static_cast<size_t>(i)] = t;
  }
  if (widen) {
    auto del = Check(PQexec(conn_, ("DEALLOCATE " + p.name).c_str()), sql);
    if (!del.ok()) return del.status();
    auto again = Check(PQprepare(conn_, p.name.c_str(), translated.c_str(), p.params, types.data()), sql);
    if (!again.ok()) return again.status();
  }
  prepared_.emplace(sql, p);
  return p;
}

Result<Stmt> PgDb::Prepare(const std::string& sql) {
  auto p = Lookup(sql);
  if (!p.ok()) return p.status();
  return Stmt(std::make_unique<PgStmt>(this, sql, std::move(p).value(), epoch_));
}

Result<PgDb::PgResult> PgDb::RunPrepared(const std::string& sql, Prepared* p, uint64_t* epoch,
                                         const std::vector<const char*>& values) {
  if (Status s = Ready(); !s.ok()) return s;
  if (*epoch != epoch_) {
    auto again = Lookup(sql);
    if (!again.ok()) return again.status();
    *p = std::move(again).value();
    *epoch = epoch_;
  }
  return Check(PQexecPrepared(conn_, p->name.c_str(), static_cast<int>(values.size()), values.data(), nullptr,
                              nullptr, /*resultFormat=*/0),
               sql);
}

std::string PgDb::JsonText(std::string_view column, std::string_view key) const {
  return "(" + std::string(column) + "::json ->> '" + std::string(key) + "')";
}

Status PgDb::Begin() {
  const std::string sql = "BEGIN ISOLATION LEVEL READ COMMITTED; SELECT pg_advisory_xact_lock(" +
                          std::to_string(kWriterLock) + ")";
  auto r = Simple(sql, sql);
  if (r.ok()) return Status();
  // BEGIN went through but the lock did not (a timeout): end it here.
  if (Status rb = Rollback(); !rb.ok()) {
    return Status(r.status().code(),
                  r.status().message() + " (and the rollback failed: " + rb.message() + ")");
  }
  return r.status();
}

Status PgDb::Commit() {
  auto r = Simple("COMMIT", "COMMIT");
  if (!r.ok()) {
    in_tx_ = false;  // committed or not, the server holds no transaction of ours now
    if (r.status().code() == Code::kUnavailable) {
      return Status(Code::kUnavailable,
                    r.status().message() + "; the transaction may or may not have committed");
    }
    return r.status();
  }
  // COMMIT of a transaction in which a statement failed rolls it back.
  if (std::strcmp(PQcmdStatus(r.value().get()), "ROLLBACK") == 0) {
    return Status(Code::kInternal,
                  "postgresql: the transaction was rolled back: a statement in it had failed");
  }
  return Status();
}

Status PgDb::Rollback() {
  if (!conn_ || PQstatus(conn_) != CONNECTION_OK) {
    in_tx_ = false;  // the server discards a transaction whose connection is gone
    return Status();
  }
  return Simple("ROLLBACK", "ROLLBACK").status();
}

}  // namespace burst
