#include "db/metadata.h"

#include "core/fs.h"
#include "core/ids.h"
#include "db/rows.h"

namespace burst {
namespace {

Org ReadOrg(const Stmt& q) { return Org{q.Text(0), q.Text(1), q.Int(2)}; }

ApiKey ReadKey(const Stmt& q) {
  return ApiKey{q.Text(0), q.Text(1), q.Text(2), q.Text(3), q.Int(4), q.Int(5) != 0};
}

const char* kKeyColumns = "id, org_id, name, prefix, created_at, revoked";
const char* kFileColumns =
    "id, org_id, filename, purpose, bytes, sha256, format, examples, created_at, object_key";

FileRecord ReadFileRecord(const Stmt& q) {
  return FileRecord{q.Text(0), q.Text(1), q.Text(2), q.Text(3), q.Int(4),
                    q.Text(5), q.Text(6), q.Int(7),  q.Int(8),  q.Text(9)};
}

}  // namespace

const std::vector<std::string>& MetadataSchema() {
  static const std::vector<std::string> steps = {
      // 1: organisations and API keys
      "CREATE TABLE orgs ("
      "  id TEXT PRIMARY KEY,"
      "  name TEXT NOT NULL,"
      "  created_at INTEGER NOT NULL);"
      "CREATE TABLE api_keys ("
      "  id TEXT PRIMARY KEY,"
      "  org_id TEXT NOT NULL REFERENCES orgs(id),"
      "  name TEXT NOT NULL,"
      "  prefix TEXT NOT NULL,"
      "  secret_sha256 TEXT NOT NULL UNIQUE,"
      "  created_at INTEGER NOT NULL,"
      "  revoked INTEGER NOT NULL DEFAULT 0);"
      "CREATE INDEX api_keys_org ON api_keys(org_id);",
      // 2: uploaded files
      "CREATE TABLE files ("
      "  seq INTEGER PRIMARY KEY AUTOINCREMENT,"
      "  id TEXT NOT NULL UNIQUE,"
      "  org_id TEXT NOT NULL REFERENCES orgs(id),"
      "  filename TEXT NOT NULL,"
      "  purpose TEXT NOT NULL,"
      "  bytes INTEGER NOT NULL,"
      "  sha256 TEXT NOT NULL,"
      "  format TEXT NOT NULL,"
      "  examples INTEGER NOT NULL,"
      "  created_at INTEGER NOT NULL,"
      "  object_key TEXT NOT NULL);"
      "CREATE INDEX files_org ON files(org_id, seq);",
      // 3: jobs and their attempts, events, logs and checkpoints; workers and
      // the usage ledger
      "CREATE TABLE jobs ("
      "  seq INTEGER PRIMARY KEY AUTOINCREMENT,"
      "  id TEXT NOT NULL UNIQUE,"
      "  org_id TEXT NOT NULL REFERENCES orgs(id),"
      "  status TEXT NOT NULL,"
      "  created_at INTEGER NOT NULL,"
      "  started_at INTEGER NOT NULL DEFAULT 0,"
      "  finished_at INTEGER NOT NULL DEFAULT 0,"
      "  idempotency_key TEXT,"
      "  request_sha256 TEXT NOT NULL,"
      "  spec TEXT NOT NULL,"
      "  attempts INTEGER NOT NULL DEFAULT 0,"
      "  retries INTEGER NOT NULL DEFAULT 0,"
      "  not_before_ms INTEGER NOT NULL DEFAULT 0,"
      "  step INTEGER NOT NULL DEFAULT 0,"
      "  total_steps INTEGER NOT NULL DEFAULT 0,"
      "  trained_tokens INTEGER NOT NULL DEFAULT 0,"
      "  resume_step INTEGER NOT NULL DEFAULT 0,"
      "  run_seconds REAL NOT NULL DEFAULT 0,"
      "  fine_tuned_model TEXT NOT NULL DEFAULT '',"
      "  error TEXT NOT NULL DEFAULT 'null',"
      "  UNIQUE (org_id, idempotency_key));"
      "CREATE INDEX jobs_org ON jobs(org_id, seq);"
      "CREATE INDEX jobs_status ON jobs(status, seq);"
      "CREATE TABLE attempts ("
      "  job_id TEXT NOT NULL REFERENCES jobs(id),"
      "  attempt INTEGER NOT NULL,"
      "  worker_id TEXT NOT NULL,"
      "  started_ms INTEGER NOT NULL,"
      "  ended_ms INTEGER NOT NULL DEFAULT 0,"
      "  outcome TEXT NOT NULL DEFAULT '',"
      "  error TEXT NOT NULL DEFAULT 'null',"
      "  resumed_from INTEGER NOT NULL DEFAULT 0,"
      "  PRIMARY KEY (job_id, attempt));"
      "CREATE TABLE events ("
      "  seq INTEGER PRIMARY KEY AUTOINCREMENT,"
      "  job_id TEXT NOT NULL REFERENCES jobs(id),"
      "  created_at INTEGER NOT NULL,"
      "  level TEXT NOT NULL,"
      "  type TEXT NOT NULL,"
      "  message TEXT NOT NULL,"
      "  data TEXT NOT NULL);"
      "CREATE INDEX events_job ON events(job_id, seq);"
      "CREATE TABLE logs ("
      "  seq INTEGER PRIMARY KEY AUTOINCREMENT,"
      "  job_id TEXT NOT NULL REFERENCES jobs(id),"
      "  attempt INTEGER NOT NULL,"
      "  created_at INTEGER NOT NULL,"
      "  text TEXT NOT NULL);"
      "CREATE INDEX logs_job ON logs(job_id, seq);"
      "CREATE TABLE checkpoints ("
      "  job_id TEXT NOT NULL REFERENCES jobs(id),"
      "  step INTEGER NOT NULL,"
      "  created_at INTEGER NOT NULL,"
      "  metrics TEXT NOT NULL,"
      "  prefix TEXT NOT NULL,"
      "  PRIMARY KEY (job_id, step));"
      "CREATE TABLE workers ("
      "  id TEXT PRIMARY KEY,"
      "  state TEXT NOT NULL,"
      "  record TEXT NOT NULL);"
      "CREATE INDEX workers_state ON workers(state);"
      "CREATE TABLE usage ("
      "  seq INTEGER PRIMARY KEY AUTOINCREMENT,"
      "  worker_id TEXT NOT NULL,"
      "  org_id TEXT NOT NULL,"
      "  job_id TEXT NOT NULL,"
      "  line TEXT NOT NULL,"
      "  start_ms INTEGER NOT NULL,"
      "  end_ms INTEGER NOT NULL,"
      "  cost REAL NOT NULL);"
      "CREATE INDEX usage_org ON usage(org_id, start_ms);"
      "CREATE INDEX usage_job ON usage(job_id);"
      "CREATE INDEX usage_worker ON usage(worker_id, start_ms);",
      // 4: what a finished job measured (baseline and final eval, last loss)
      "ALTER TABLE jobs ADD COLUMN result TEXT NOT NULL DEFAULT 'null';",
      // 5: sweeps: one job body fanned out over a grid (db/sweeps.cpp); the
      // runs are [{"job_id", "overrides"}] in point order, each an ordinary job
      "CREATE TABLE sweeps ("
      "  seq INTEGER PRIMARY KEY AUTOINCREMENT,"
      "  id TEXT NOT NULL UNIQUE,"
      "  org_id TEXT NOT NULL REFERENCES orgs(id),"
      "  created_at INTEGER NOT NULL,"
      "  idempotency_key TEXT,"
      "  request_sha256 TEXT NOT NULL,"
      "  request TEXT NOT NULL,"
      "  runs TEXT NOT NULL,"
      "  cancelled_at INTEGER NOT NULL DEFAULT 0,"
      "  UNIQUE (org_id, idempotency_key));"
      "CREATE INDEX sweeps_org ON sweeps(org_id, seq);",
      // 6: deployments (db/deployments.cpp); one live deployment per name
      "CREATE TABLE deployments ("
      "  seq INTEGER PRIMARY KEY AUTOINCREMENT,"
      "  id TEXT NOT NULL UNIQUE,"
      "  org_id TEXT NOT NULL REFERENCES orgs(id),"
      "  name TEXT NOT NULL,"
      "  created_at INTEGER NOT NULL,"
      "  deleted_at INTEGER NOT NULL DEFAULT 0,"
      "  request_sha256 TEXT NOT NULL,"
      "  request TEXT NOT NULL,"
      "  target TEXT NOT NULL,"
      "  requests INTEGER NOT NULL DEFAULT 0,"
      "  cold_starts INTEGER NOT NULL DEFAULT 0,"
      "  last_request_ms INTEGER NOT NULL DEFAULT 0);"
      "CREATE UNIQUE INDEX deployments_live_name ON deployments(org_id, name) WHERE deleted_at = 0;",
      // 7: billing scopes: serverless work's worker time at cost 0 plus token
      // charges; every row names the fine-tuning job (run) it belongs to
      // (one migration of several statements, no comma between them)
      // NOLINTNEXTLINE(bugprone-suspicious-missing-comma)
      "ALTER TABLE usage ADD COLUMN scope TEXT NOT NULL DEFAULT 'dedicated';"
      "ALTER TABLE usage ADD COLUMN tokens INTEGER NOT NULL DEFAULT 0;"
      "ALTER TABLE usage ADD COLUMN run_id TEXT NOT NULL DEFAULT '';"
      "CREATE INDEX usage_run ON usage(org_id, run_id);",
      // 8: workers listed in the order they were first recorded (seq, set by
      // PutWorker's first insert), not by SQLite's rowid, which PostgreSQL
      // has not; the rows from before keep 0 and list first, by id
      "ALTER TABLE workers ADD COLUMN seq INTEGER NOT NULL DEFAULT 0;"
      "CREATE INDEX workers_seq ON workers(seq);",
      // 9: the leader lease (db/leader.cpp): which control plane is active
      "CREATE TABLE leader ("
      "  id INTEGER PRIMARY KEY,"
      "  holder TEXT NOT NULL,"
      "  url TEXT NOT NULL,"
      "  expires_ms INTEGER NOT NULL,"
      "  term INTEGER NOT NULL);",
      // 10: an attempt's cold start, split into queue and start-up
      "ALTER TABLE attempts ADD COLUMN queued_ms INTEGER NOT NULL DEFAULT 0;"
      "ALTER TABLE attempts ADD COLUMN startup_ms INTEGER NOT NULL DEFAULT 0;",
      // 11: the device a usage row's worker held (a GPU type, and how many)
      // NOLINTNEXTLINE(bugprone-suspicious-missing-comma)
      "ALTER TABLE usage ADD COLUMN device TEXT NOT NULL DEFAULT 'cpu';"
      "ALTER TABLE usage ADD COLUMN units INTEGER NOT NULL DEFAULT 1;",
  };
  return steps;
}

Result<std::unique_ptr<Metadata>> Metadata::Open(const std::string& url) {
  auto db = Db::Open(url);
  if (!db.ok()) return db.status();
  if (Status s = db.value()->Migrate(MetadataSchema()); !s.ok()) return s;
  std::vector<std::unique_ptr<Db>> pool;
  const bool postgres = db.value()->backend() == Backend::kPostgres;
  // An in-memory SQLite is one database per connection: it keeps one.
  const bool in_memory = !postgres && (url == ":memory:" || url.find("mode=memory") != std::string::npos ||
                                       url.rfind("file::memory:", 0) == 0);
  pool.push_back(std::move(db).value());
  // The rest are opened now, so a call never waits for a connection to be
  // made. On SQLite (WAL) readers run beside the one writer; on PostgreSQL
  // each reconnects by itself after a lost server (db/postgres.h).
  const int size = postgres ? kPgConnections : in_memory ? 1 : kSqliteConnections;
  for (int i = 1; i < size; ++i) {
    auto more = Db::Open(url);
    if (!more.ok()) return more.status();
    pool.push_back(std::move(more).value());
  }
  return std::unique_ptr<Metadata>(new Metadata(std::move(pool)));
}

Metadata::Metadata(std::vector<std::unique_ptr<Db>> pool) : idle_(std::move(pool)) {}

Metadata::Conn Metadata::Lease() {
  std::unique_lock<std::mutex> lock(pool_mu_);
  pool_cv_.wait(lock, [&] { return !idle_.empty(); });
  std::unique_ptr<Db> db = std::move(idle_.back());
  idle_.pop_back();
  return Conn(*this, std::move(db));
}

void Metadata::Release(std::unique_ptr<Db> db) {
  {
    std::lock_guard<std::mutex> lock(pool_mu_);
    idle_.push_back(std::move(db));
  }
  pool_cv_.notify_one();
}

Result<Org> Metadata::CreateOrg(const std::string& name) {
  if (name.empty() || name.size() > 256) {
    return Status(Code::kInvalidArgument, "organisation name must be 1-256 characters", "name");
  }
  Conn db = Lease();
  Org org{NewId("org"), name, NowSeconds()};
  auto ins = db->Prepare("INSERT INTO orgs (id, name, created_at) VALUES (?, ?, ?)");
  if (!ins.ok()) return ins.status();
  if (Status s = ins.value().Bind(1, org.id).Bind(2, org.name).Bind(3, org.created_at).Run(); !s.ok())
    return s;
  return org;
}

Result<Org> Metadata::GetOrg(const std::string& id) {
  Conn db = Lease();
  auto q = db->Prepare("SELECT id, name, created_at FROM orgs WHERE id = ?");
  if (q.ok()) q.value().Bind(1, id);
  return OneRow(q, ReadOrg, Status(Code::kNotFound, "no organisation " + id, "org"));
}

Result<std::vector<Org>> Metadata::ListOrgs() {
  Conn db = Lease();
  auto q = db->Prepare("SELECT id, name, created_at FROM orgs ORDER BY created_at, id");
  return AllRows(q, ReadOrg);
}

Result<NewApiKey> Metadata::CreateApiKey(const std::string& org_id, const std::string& name) {
  if (name.size() > 256) return Status(Code::kInvalidArgument, "key name over 256 characters", "name");
  if (auto org = GetOrg(org_id); !org.ok()) return org.status();
  Conn db = Lease();
  NewApiKey out;
  out.secret = NewSecret("burst");
  out.key = ApiKey{NewId("key"), org_id, name, out.secret.substr(0, 12), NowSeconds(), false};
  auto ins = db->Prepare(
      "INSERT INTO api_keys (id, org_id, name, prefix, secret_sha256, created_at) "
      "VALUES (?, ?, ?, ?, ?, ?)");
  if (!ins.ok()) return ins.status();
  Status s = ins.value()
                 .Bind(1, out.key.id)
                 .Bind(2, org_id)
                 .Bind(3, name)
                 .Bind(4, out.key.prefix)
                 .Bind(5, Sha256Hex(out.secret))
                 .Bind(6, out.key.created_at)
                 .Run();
  if (!s.ok()) return s;
  return out;
}

Result<ApiKey> Metadata::Authenticate(const std::string& secret) {
  Conn db = Lease();
  auto q = db->Prepare(std::string("SELECT ") + kKeyColumns +
                       " FROM api_keys WHERE secret_sha256 = ? AND revoked = 0");
  if (q.ok()) q.value().Bind(1, Sha256Hex(secret));
  return OneRow(q, ReadKey, Status(Code::kNotFound, "unknown or revoked API key", "authorization"));
}

Status Metadata::RevokeApiKey(const std::string& org_id, const std::string& key_id) {
  Conn db = Lease();
  auto q = db->Prepare("UPDATE api_keys SET revoked = 1 WHERE id = ? AND org_id = ?");
  if (!q.ok()) return q.status();
  if (Status s = q.value().Bind(1, key_id).Bind(2, org_id).Run(); !s.ok()) return s;
  if (db->Changes() == 0) return Status(Code::kNotFound, "no API key " + key_id, "key");
  return Status();
}

Result<std::vector<ApiKey>> Metadata::ListApiKeys(const std::string& org_id) {
  Conn db = Lease();
  auto q = db->Prepare(std::string("SELECT ") + kKeyColumns +
                       " FROM api_keys WHERE org_id = ? ORDER BY created_at, id");
  if (q.ok()) q.value().Bind(1, org_id);
  return AllRows(q, ReadKey);
}

Status Metadata::CreateFile(FileRecord& f) {
  f.created_at = NowSeconds();
  Conn db = Lease();
  auto ins = db->Prepare(std::string("INSERT INTO files (") + kFileColumns +
                         ") VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)");
  if (!ins.ok()) return ins.status();
  return ins.value()
      .Bind(1, f.id)
      .Bind(2, f.org_id)
      .Bind(3, f.filename)
      .Bind(4, f.purpose)
      .Bind(5, f.bytes)
      .Bind(6, f.sha256)
      .Bind(7, f.format)
      .Bind(8, f.examples)
      .Bind(9, f.created_at)
      .Bind(10, f.object_key)
      .Run();
}

Result<FileRecord> Metadata::GetFile(const std::string& org_id, const std::string& id) {
  Conn db = Lease();
  auto q = db->Prepare(std::string("SELECT ") + kFileColumns + " FROM files WHERE org_id = ? AND id = ?");
  if (q.ok()) q.value().Bind(1, org_id).Bind(2, id);
  return OneRow(q, ReadFileRecord, Status(Code::kNotFound, "no file " + id, "file_id"));
}

Result<std::vector<FileRecord>> Metadata::ListFiles(const std::string& org_id, const std::string& after,
                                                    int64_t limit) {
  Conn db = Lease();
  auto q = db->Prepare(std::string("SELECT ") + kFileColumns +
                       " FROM files WHERE org_id = ?1 AND (?2 = '' OR seq < (SELECT seq FROM files "
                       "WHERE id = ?2 AND org_id = ?1)) ORDER BY seq DESC LIMIT ?3");
  if (q.ok()) q.value().Bind(1, org_id).Bind(2, after).Bind(3, limit);
  return AllRows(q, ReadFileRecord);
}

Status Metadata::DeleteFile(const std::string& org_id, const std::string& id) {
  Conn db = Lease();
  auto q = db->Prepare("DELETE FROM files WHERE org_id = ? AND id = ?");
  if (!q.ok()) return q.status();
  if (Status s = q.value().Bind(1, org_id).Bind(2, id).Run(); !s.ok()) return s;
  if (db->Changes() == 0) return Status(Code::kNotFound, "no file " + id, "file_id");
  return Status();
}

}  // namespace burst
