// Db::Open (the `database` setting to a backend), migrations and the URL
// redaction shared by both backends.
#include "db/db.h"

#include "core/utc.h"
#include "db/postgres.h"
#include "db/sqlite.h"

namespace burst {
namespace {

bool StartsWith(std::string_view s, std::string_view prefix) { return s.substr(0, prefix.size()) == prefix; }

Status BadUrl(const std::string& url, const std::string& why) {
  return Status(Code::kInvalidArgument, "database: " + why + " (got \"" + RedactDatabaseUrl(url) + "\")",
                "database");
}

const char* kMigrationsTable =
    "CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY, applied_at TEXT NOT NULL)";

Result<int64_t> ReadVersion(Db& db) {
  if (Status s = db.Exec(kMigrationsTable); !s.ok()) return s;
  Result<Stmt> q = db.Prepare("SELECT COALESCE(MAX(version), 0) FROM schema_migrations");
  if (!q.ok()) return q.status();
  Result<bool> row = q.value().Step();
  if (!row.ok()) return row.status();
  return q.value().Int(0);
}

}  // namespace

Status Stmt::Run() {
  for (;;) {
    Result<bool> r = Step();
    if (!r.ok()) return r.status();
    if (!r.value()) return Status();
  }
}

Result<std::unique_ptr<Db>> Db::Open(const std::string& url) {
  if (url.empty()) return BadUrl(url, "empty: give a file path, sqlite:///abs/path or postgresql://...");
  if (StartsWith(url, "postgresql://") || StartsWith(url, "postgres://")) return PgDb::Open(url);
  if (StartsWith(url, "sqlite://")) {
    const std::string path = url.substr(std::string_view("sqlite://").size());
    if (path.empty() || path[0] != '/') {
      return BadUrl(url, "a sqlite URL names an absolute path: sqlite:///abs/path (three slashes)");
    }
    return SqliteDb::Open(path);
  }
  if (const size_t scheme = url.find("://"); scheme != std::string::npos && !StartsWith(url, "file:")) {
    return BadUrl(url, "unknown scheme \"" + url.substr(0, scheme) +
                           "\": give a file path, sqlite:///abs/path or postgresql://...");
  }
  return SqliteDb::Open(url);
}

Result<int64_t> Db::SchemaVersion() {
  int64_t version = 0;
  Status s = Transaction([&]() -> Status {
    auto v = ReadVersion(*this);
    if (!v.ok()) return v.status();
    version = v.value();
    return Status();
  });
  if (!s.ok()) return s;
  return version;
}

Status Db::Migrate(const std::vector<std::string>& steps) {
  const auto known = static_cast<int64_t>(steps.size());
  // One transaction per step, each reading the version again: another
  // control plane starting at the same time may have applied it meanwhile
  // (writers are serialized, so exactly one of them applies each step).
  for (;;) {
    int64_t applied = 0;
    bool done = false;
    Status s = Transaction([&]() -> Status {
      auto have = ReadVersion(*this);
      if (!have.ok()) return have.status();
      if (have.value() > known) {
        return Status(Code::kFailedPrecondition, "database schema version " + std::to_string(have.value()) +
                                                     " is newer than this burst knows (" +
                                                     std::to_string(known) +
                                                     "): upgrade burst before opening it");
      }
      if (have.value() == known) {
        done = true;
        return Status();
      }
      applied = have.value() + 1;
      if (Status e = Exec(steps[static_cast<size_t>(applied - 1)]); !e.ok()) return e;
      Result<Stmt> ins = Prepare("INSERT INTO schema_migrations (version, applied_at) VALUES (?, ?)");
      if (!ins.ok()) return ins.status();
      return ins.value().Bind(1, applied).Bind(2, UtcNow(kUtcSql)).Run();
    });
    if (!s.ok()) {
      if (applied == 0) return s;
      return Status(s.code(), "schema migration " + std::to_string(applied) + " failed: " + s.message());
    }
    if (done) return Status();
  }
}

std::string RedactDatabaseUrl(const std::string& url, std::vector<std::string>* hidden) {
  const size_t scheme = url.find("://");
  if (scheme == std::string::npos) return url;
  std::string out = url;
  // user:password@ before the host: the last '@' before the query, so that
  // a password holding an unencoded '/' or '@' is hidden too.
  const size_t start = scheme + 3;
  const size_t end = out.find('?', start);
  const size_t at = out.rfind('@', end == std::string::npos ? std::string::npos : end);
  if (at != std::string::npos && at >= start) {
    const size_t colon = out.find(':', start);
    if (colon != std::string::npos && colon < at) {
      if (hidden) hidden->push_back(out.substr(colon + 1, at - colon - 1));
      out.replace(colon + 1, at - colon - 1, "***");
    }
  }
  // password=... among the query parameters.
  const size_t query = out.find('?');
  if (query != std::string::npos) {
    size_t pos = query + 1;
    while (pos <= out.size()) {
      size_t amp = out.find('&', pos);
      if (amp == std::string::npos) amp = out.size();
      if (out.compare(pos, 9, "password=") == 0 && amp > pos + 9) {
        if (hidden) hidden->push_back(out.substr(pos + 9, amp - pos - 9));
        out.replace(pos + 9, amp - pos - 9, "***");
        amp = pos + 9 + 3;
      }
      pos = amp + 1;
    }
  }
  return out;
}

}  // namespace burst
