// Metadata, part two: jobs, attempts, events, logs, checkpoints, workers and
// the usage ledger (schema step 3 in metadata.cpp).
#include <tuple>

#include "core/ids.h"
#include "core/utc.h"
#include "db/metadata.h"
#include "db/rows.h"

namespace burst {
namespace {

const char* kJobColumns =
    "id, org_id, status, created_at, started_at, finished_at, idempotency_key, request_sha256, spec, "
    "attempts, retries, not_before_ms, step, total_steps, trained_tokens, resume_step, run_seconds, "
    "fine_tuned_model, error, result";

Json ParseColumn(const std::string& text) { return Json::parse(text, nullptr, /*allow_exceptions=*/false); }

Result<JobRecord> ReadJob(const Stmt& q) {
  JobRecord j;
  j.id = q.Text(0);
  j.org_id = q.Text(1);
  if (Status s = ReadState(q.Text(2), "job " + j.id, "status", &j.status); !s.ok()) return s;
  j.created_at = q.Int(3);
  j.started_at = q.Int(4);
  j.finished_at = q.Int(5);
  j.idempotency_key = q.IsNull(6) ? "" : q.Text(6);
  j.request_sha256 = q.Text(7);
  j.spec = ParseColumn(q.Text(8));
  j.attempts = q.Int(9);
  j.retries = q.Int(10);
  j.not_before_ms = q.Int(11);
  j.step = q.Int(12);
  j.total_steps = q.Int(13);
  j.trained_tokens = q.Int(14);
  j.resume_step = q.Int(15);
  j.run_seconds = q.Real(16);
  j.fine_tuned_model = q.Text(17);
  j.error = ParseColumn(q.Text(18));
  j.result = ParseColumn(q.Text(19));
  return j;
}

// An attempt still running has the outcome '' (the column's default).
Result<AttemptRecord> ReadAttempt(const Stmt& q) {
  AttemptRecord a{q.Text(0), q.Int(1), q.Text(2), q.Int(3), q.Int(4), std::nullopt, ParseColumn(q.Text(6)),
                  q.Int(7),  q.Int(8), q.Int(9)};
  if (const std::string outcome = q.Text(5); !outcome.empty()) {
    AttemptOutcome o{};
    if (Status s =
            ReadState(outcome, "attempt " + std::to_string(a.attempt) + " of " + a.job_id, "outcome", &o);
        !s.ok()) {
      return s;
    }
    a.outcome = o;
  }
  return a;
}

EventRecord ReadEvent(const Stmt& q) {
  return EventRecord{q.Int(0), q.Text(1), q.Int(2), q.Text(3), q.Text(4), q.Text(5), ParseColumn(q.Text(6))};
}

LogRecord ReadLog(const Stmt& q) { return LogRecord{q.Int(0), q.Text(1), q.Int(2), q.Int(3), q.Text(4)}; }

CheckpointRecord ReadCheckpoint(const Stmt& q) {
  return CheckpointRecord{q.Text(0), q.Int(1), q.Int(2), ParseColumn(q.Text(3)), q.Text(4)};
}

Json WorkerToJson(const WorkerRecord& w) {
  return {{"id", w.id},
          {"token_sha256", w.token_sha256},
          {"state", Stored(w.state)},
          {"slot", w.slot},
          {"pid", w.pid},
          {"model", w.model},
          {"job_id", w.job_id},
          {"attempt", w.attempt},
          {"requested_ms", w.requested_ms},
          {"started_ms", w.started_ms},
          {"exited_ms", w.exited_ms},
          {"queued_ms", w.queued_ms},
          {"since_ms", w.since_ms},
          {"heartbeat_ms", w.heartbeat_ms},
          {"exit_reason", w.exit_reason},
          {"seg_line", w.seg_line ? Stored(*w.seg_line) : ""},  // "": no segment open
          {"seg_org", w.seg_org},
          {"seg_job", w.seg_job},
          {"seg_start_ms", w.seg_start_ms},
          {"seg_scope", Stored(w.seg_scope)},
          {"seg_run", w.seg_run},
          {"last_scope", Stored(w.last_scope)},
          {"last_run", w.last_run},
          {"last_org", w.last_org},
          {"deployment", w.deployment},
          {"device", w.device},
          {"gpus", w.gpus}};
}

Result<WorkerRecord> ReadWorker(const Stmt& q) {
  Json j = ParseColumn(q.Text(0));
  if (!j.is_object()) {
    return Status(Code::kDataLoss, "a worker's record in the database is not a JSON object", "record");
  }
  WorkerRecord w;
  w.id = j.value("id", "");
  const std::string row = "worker " + w.id;
  w.token_sha256 = j.value("token_sha256", "");
  if (Status s = ReadState(j.value("state", ""), row, "state", &w.state); !s.ok()) return s;
  w.slot = j.value("slot", int64_t{0});
  w.device = j.value("device", "cpu");
  if (const Json& g = j.value("gpus", Json::array()); g.is_array()) {
    for (const Json& i : g)
      if (i.is_number_integer()) w.gpus.push_back(i.get<int64_t>());
  }
  w.pid = j.value("pid", int64_t{0});
  w.model = j.value("model", "");
  w.job_id = j.value("job_id", "");
  w.attempt = j.value("attempt", int64_t{0});
  w.requested_ms = j.value("requested_ms", int64_t{0});
  w.started_ms = j.value("started_ms", int64_t{0});
  w.exited_ms = j.value("exited_ms", int64_t{0});
  w.queued_ms = j.value("queued_ms", int64_t{0});
  w.since_ms = j.value("since_ms", int64_t{0});
  w.heartbeat_ms = j.value("heartbeat_ms", int64_t{0});
  w.exit_reason = j.value("exit_reason", "");
  if (const std::string line = j.value("seg_line", ""); !line.empty()) {
    UsageLine l{};
    if (Status s = ReadState(line, row, "seg_line", &l); !s.ok()) return s;
    w.seg_line = l;
  }
  w.seg_org = j.value("seg_org", "");
  w.seg_job = j.value("seg_job", "");
  w.seg_start_ms = j.value("seg_start_ms", int64_t{0});
  // Records written before billing scopes existed have none: dedicated.
  const std::string dedicated = Stored(BillingScope::kDedicated);
  if (Status s = ReadState(j.value("seg_scope", dedicated), row, "seg_scope", &w.seg_scope); !s.ok())
    return s;
  w.seg_run = j.value("seg_run", "");
  if (Status s = ReadState(j.value("last_scope", dedicated), row, "last_scope", &w.last_scope); !s.ok())
    return s;
  w.last_run = j.value("last_run", "");
  w.last_org = j.value("last_org", "");
  w.deployment = j.value("deployment", "");
  return w;
}

// See Metadata::IdempotentReplay; the caller holds the lock.
Result<std::optional<JobRecord>> Replay(Db& db, const std::string& org_id, const std::string& key,
                                        const std::string& sha) {
  auto q = db.Prepare(std::string("SELECT ") + kJobColumns +
                      " FROM jobs WHERE org_id = ? AND idempotency_key = ?");
  if (q.ok()) q.value().Bind(1, org_id).Bind(2, key);
  auto prev = OneRow(q, ReadJob, Status(Code::kNotFound, ""));
  if (!prev.ok()) {
    if (prev.status().code() == Code::kNotFound) return std::optional<JobRecord>();
    return prev.status();
  }
  if (prev.value().request_sha256 == sha) return std::optional<JobRecord>(prev.value());
  return Status(Code::kAlreadyExists,
                "Idempotency-Key \"" + key + "\" was used for job " + prev.value().id +
                    " with a different request body",
                "idempotency_key");
}

// "YYYY-MM-DD" of a day counted from 1970-01-01 (UTC).
std::string UtcDay(int64_t days) { return FormatUtc(days * 86400, "%Y-%m-%d"); }

const char* kInsertEvent = "INSERT INTO events (job_id, created_at, level, type, message, data) VALUES ";

Status NotFoundJob(const std::string& id) {
  return Status(Code::kNotFound, "no fine-tuning job " + id, "job_id");
}

}  // namespace

Result<BillingScope> RecordedScope(const Json& spec_or_target, const std::string& what) {
  // Records from before billing scopes existed have none: dedicated.
  const Json scope = spec_or_target.is_object()
                         ? spec_or_target.value("scope", Json(Stored(BillingScope::kDedicated)))
                         : Json();
  if (!scope.is_string())
    return Status(Code::kDataLoss, what + " in the database: scope: not a string", "scope");
  BillingScope out{};
  if (Status s = ReadState(scope.get<std::string>(), what, "scope", &out); !s.ok()) return s;
  return out;
}

Result<JobRecord> Metadata::CreateJob(JobRecord job, bool* created, const std::vector<EventRecord>& events) {
  std::vector<NewJob> one(1);
  one[0].job = std::move(job);
  one[0].events = events;
  if (Status s = CreateJobs(one); !s.ok()) return s;
  *created = one[0].created;
  return std::move(one[0].result);
}

Status Metadata::CreateJobs(std::vector<NewJob>& jobs) {
  const int64_t now = NowSeconds();
  for (NewJob& n : jobs) {
    n.job.created_at = now;
    n.created = false;
  }
  Conn db = Lease();
  // The keys are looked up inside the transaction that writes, so two
  // submissions with one key (in this batch, or from two control planes)
  // never both create a job.
  Status st = db->Transaction([&]() -> Status {
    for (NewJob& n : jobs) {
      const JobRecord& job = n.job;
      n.created = false;
      if (!job.idempotency_key.empty()) {
        auto prev = Replay(*db, job.org_id, job.idempotency_key, job.request_sha256);
        if (!prev.ok() && prev.status().code() != Code::kAlreadyExists) return prev.status();
        if (!prev.ok() || prev.value()) {  // a conflict, or the earlier job
          n.result = prev.ok() ? Result<JobRecord>(*prev.value()) : Result<JobRecord>(prev.status());
          continue;
        }
      }
      auto ins = db->Prepare(
          "INSERT INTO jobs (id, org_id, status, created_at, idempotency_key, request_sha256, spec, "
          "total_steps) "
          "VALUES (?, ?, ?, ?, ?, ?, ?, ?)");
      if (!ins.ok()) return ins.status();
      Stmt& s = ins.value();
      s.Bind(1, job.id).Bind(2, job.org_id).Bind(3, Stored(job.status)).Bind(4, job.created_at);
      if (job.idempotency_key.empty())
        s.BindNull(5);
      else
        s.Bind(5, job.idempotency_key);
      s.Bind(6, job.request_sha256).Bind(7, job.spec.dump()).Bind(8, job.total_steps);
      if (Status r = s.Run(); !r.ok()) return r;
      Status ev = InsertRows(*db, kInsertEvent, 6, n.events.size(), [&](Stmt& q, int p, size_t i) {
        const EventRecord& e = n.events[i];
        q.Bind(p, job.id)
            .Bind(p + 1, job.created_at)
            .Bind(p + 2, e.level)
            .Bind(p + 3, e.type)
            .Bind(p + 4, e.message)
            .Bind(p + 5, e.data.dump());
      });
      if (!ev.ok()) return ev;
      n.result = job;
      n.created = true;
    }
    return Status();
  });
  if (!st.ok()) {
    for (NewJob& n : jobs) {
      n.created = false;
      n.result = st;
    }
  }
  return st;
}

Status Metadata::UpdateJob(const JobRecord& j) {
  Conn db = Lease();
  auto q = db->Prepare(
      "UPDATE jobs SET status = ?, started_at = ?, finished_at = ?, attempts = ?, retries = ?, not_before_ms "
      "= ?, "
      "step = ?, total_steps = ?, trained_tokens = ?, resume_step = ?, run_seconds = ?, fine_tuned_model = "
      "?, "
      "error = ?, result = ? WHERE id = ?");
  if (!q.ok()) return q.status();
  Status s = q.value()
                 .Bind(1, Stored(j.status))
                 .Bind(2, j.started_at)
                 .Bind(3, j.finished_at)
                 .Bind(4, j.attempts)
                 .Bind(5, j.retries)
                 .Bind(6, j.not_before_ms)
                 .Bind(7, j.step)
                 .Bind(8, j.total_steps)
                 .Bind(9, j.trained_tokens)
                 .Bind(10, j.resume_step)
                 .Bind(11, j.run_seconds)
                 .Bind(12, j.fine_tuned_model)
                 .Bind(13, j.error.dump())
                 .Bind(14, j.result.dump())
                 .Bind(15, j.id)
                 .Run();
  if (!s.ok()) return s;
  if (db->Changes() == 0) return NotFoundJob(j.id);
  return Status();
}

Result<JobRecord> Metadata::GetJob(const std::string& org_id, const std::string& id) {
  Conn db = Lease();
  auto q = db->Prepare(std::string("SELECT ") + kJobColumns + " FROM jobs WHERE org_id = ? AND id = ?");
  if (q.ok()) q.value().Bind(1, org_id).Bind(2, id);
  return OneRow(q, ReadJob, NotFoundJob(id));
}

Result<JobRecord> Metadata::GetJobById(const std::string& id) {
  Conn db = Lease();
  auto q = db->Prepare(std::string("SELECT ") + kJobColumns + " FROM jobs WHERE id = ?");
  if (q.ok()) q.value().Bind(1, id);
  return OneRow(q, ReadJob, NotFoundJob(id));
}

Result<std::optional<JobRecord>> Metadata::IdempotentReplay(const std::string& org_id, const std::string& key,
                                                            const std::string& request_sha256) {
  Conn db = Lease();
  return Replay(*db, org_id, key, request_sha256);
}

Result<std::vector<JobRecord>> Metadata::ListJobs(const std::string& org_id, const std::string& after,
                                                  int64_t limit, TaskKind kind) {
  Conn db = Lease();
  auto q = db->Prepare(std::string("SELECT ") + kJobColumns +
                       " FROM jobs WHERE org_id = ?1 AND (?2 = '' OR seq < (SELECT seq FROM jobs "
                       "WHERE id = ?2 AND org_id = ?1)) AND COALESCE(" +
                       db->JsonText("spec", "kind") +
                       ", 'train') = ?4 "
                       "ORDER BY seq DESC LIMIT ?3");
  if (q.ok()) q.value().Bind(1, org_id).Bind(2, after).Bind(3, limit).Bind(4, std::string(ToString(kind)));
  return AllRows(q, ReadJob);
}

Result<std::vector<JobRecord>> Metadata::ListActiveJobs() {
  Conn db = Lease();
  auto q = db->Prepare(std::string("SELECT ") + kJobColumns +
                       " FROM jobs WHERE status IN (?, ?, ?, ?) ORDER BY seq");
  // Every status that is not terminal.
  if (q.ok()) {
    q.value()
        .Bind(1, Stored(JobStatus::kValidatingFiles))
        .Bind(2, Stored(JobStatus::kQueued))
        .Bind(3, Stored(JobStatus::kRunning))
        .Bind(4, Stored(JobStatus::kPaused));
  }
  return AllRows(q, ReadJob);
}

Status Metadata::AddAttempt(const AttemptRecord& a) {
  Conn db = Lease();
  auto q = db->Prepare(
      "INSERT INTO attempts (job_id, attempt, worker_id, started_ms, resumed_from, queued_ms, startup_ms) "
      "VALUES (?, ?, ?, ?, ?, ?, ?)");
  if (!q.ok()) return q.status();
  return q.value()
      .Bind(1, a.job_id)
      .Bind(2, a.attempt)
      .Bind(3, a.worker_id)
      .Bind(4, a.started_ms)
      .Bind(5, a.resumed_from)
      .Bind(6, a.queued_ms)
      .Bind(7, a.startup_ms)
      .Run();
}

Status Metadata::EndAttempt(const std::string& job_id, int64_t attempt, int64_t ended_ms,
                            AttemptOutcome outcome, const Json& error) {
  Conn db = Lease();
  auto q = db->Prepare(
      "UPDATE attempts SET ended_ms = ?, outcome = ?, error = ? WHERE job_id = ? AND attempt = ? AND outcome "
      "= ''");
  if (!q.ok()) return q.status();
  return q.value()
      .Bind(1, ended_ms)
      .Bind(2, Stored(outcome))
      .Bind(3, error.dump())
      .Bind(4, job_id)
      .Bind(5, attempt)
      .Run();
}

Result<std::vector<AttemptRecord>> Metadata::ListAttempts(const std::string& job_id) {
  Conn db = Lease();
  auto q = db->Prepare(
      "SELECT job_id, attempt, worker_id, started_ms, ended_ms, outcome, error, resumed_from, queued_ms, "
      "startup_ms "
      "FROM attempts "
      "WHERE job_id = ? ORDER BY attempt");
  if (q.ok()) q.value().Bind(1, job_id);
  return AllRows(q, ReadAttempt);
}

Result<std::vector<AttemptRecord>> Metadata::ListOpenAttempts() {
  Conn db = Lease();
  auto q = db->Prepare(
      "SELECT job_id, attempt, worker_id, started_ms, ended_ms, outcome, error, resumed_from, queued_ms, "
      "startup_ms "
      "FROM attempts "
      "WHERE outcome = '' ORDER BY started_ms");
  return AllRows(q, ReadAttempt);
}

Status Metadata::AddEvents(const std::vector<EventRecord>& events) {
  if (events.empty()) return Status();
  Conn db = Lease();
  return db->Transaction([&]() -> Status {
    return InsertRows(*db, kInsertEvent, 6, events.size(), [&](Stmt& q, int p, size_t i) {
      const EventRecord& e = events[i];
      q.Bind(p, e.job_id)
          .Bind(p + 1, e.created_at ? e.created_at : NowSeconds())
          .Bind(p + 2, e.level)
          .Bind(p + 3, e.type)
          .Bind(p + 4, e.message)
          .Bind(p + 5, e.data.dump());
    });
  });
}

Result<std::vector<EventRecord>> Metadata::ListEvents(const std::string& job_id, const std::string& after,
                                                      int64_t limit, bool ascending) {
  int64_t after_seq = 0;
  const std::string prefix = "ftevent-";
  if (!after.empty()) {
    char* end = nullptr;
    after_seq = after.rfind(prefix, 0) == 0 ? std::strtoll(after.c_str() + prefix.size(), &end, 10) : -1;
    if (after_seq <= 0 || *end != '\0') return Status(Code::kInvalidArgument, "no event " + after, "after");
  }
  Conn db = Lease();
  std::string sql =
      "SELECT seq, job_id, created_at, level, type, message, data FROM events WHERE job_id = ?1 AND ";
  sql += ascending ? "seq > ?2 ORDER BY seq ASC LIMIT ?3" : "(?2 = 0 OR seq < ?2) ORDER BY seq DESC LIMIT ?3";
  auto q = db->Prepare(sql);
  if (q.ok()) q.value().Bind(1, job_id).Bind(2, after_seq).Bind(3, limit);
  return AllRows(q, ReadEvent);
}

Status Metadata::AddLogs(const std::vector<LogRecord>& logs) {
  if (logs.empty()) return Status();
  Conn db = Lease();
  return db->Transaction([&]() -> Status {
    return InsertRows(*db, "INSERT INTO logs (job_id, attempt, created_at, text) VALUES ", 4, logs.size(),
                      [&](Stmt& q, int p, size_t i) {
                        const LogRecord& l = logs[i];
                        q.Bind(p, l.job_id)
                            .Bind(p + 1, l.attempt)
                            .Bind(p + 2, l.created_at ? l.created_at : NowSeconds())
                            .Bind(p + 3, l.text);
                      });
  });
}

Result<std::vector<LogRecord>> Metadata::ListLogs(const std::string& job_id, int64_t after_seq,
                                                  int64_t limit) {
  Conn db = Lease();
  auto q = db->Prepare(
      "SELECT seq, job_id, attempt, created_at, text FROM logs WHERE job_id = ? AND seq > ? ORDER BY seq "
      "LIMIT ?");
  if (q.ok()) q.value().Bind(1, job_id).Bind(2, after_seq).Bind(3, limit);
  return AllRows(q, ReadLog);
}

Status Metadata::AddCheckpoint(const CheckpointRecord& c) {
  Conn db = Lease();
  auto q = db->Prepare(
      "INSERT INTO checkpoints (job_id, step, created_at, metrics, prefix) VALUES (?, ?, ?, ?, ?) "
      "ON CONFLICT (job_id, step) DO UPDATE SET created_at = excluded.created_at, metrics = "
      "excluded.metrics, "
      "prefix = excluded.prefix");
  if (!q.ok()) return q.status();
  return q.value()
      .Bind(1, c.job_id)
      .Bind(2, c.step)
      .Bind(3, c.created_at ? c.created_at : NowSeconds())
      .Bind(4, c.metrics.dump())
      .Bind(5, c.prefix)
      .Run();
}

Result<std::vector<CheckpointRecord>> Metadata::ListCheckpoints(const std::string& job_id,
                                                                int64_t before_step, int64_t limit) {
  Conn db = Lease();
  auto q = db->Prepare(
      "SELECT job_id, step, created_at, metrics, prefix FROM checkpoints WHERE job_id = ?1 AND "
      "(?2 = 0 OR step < ?2) ORDER BY step DESC LIMIT ?3");
  if (q.ok()) q.value().Bind(1, job_id).Bind(2, before_step).Bind(3, limit);
  return AllRows(q, ReadCheckpoint);
}

Result<std::vector<Metadata::OrgCheckpoint>> Metadata::ListOrgCheckpoints(const std::string& org_id,
                                                                          int64_t limit) {
  Conn db = Lease();
  auto q = db->Prepare(
      "SELECT c.job_id, c.step, c.created_at, c.metrics, c.prefix, COALESCE(" +
      db->JsonText("j.spec", "model") + ", ''), COALESCE(" + db->JsonText("j.spec", "suffix") +
      ", '') FROM checkpoints c JOIN jobs j ON j.id = c.job_id WHERE j.org_id = ?1 AND COALESCE(" +
      db->JsonText("j.spec", "kind") + ", 'train') = 'train' ORDER BY j.seq DESC, c.step DESC LIMIT ?2");
  if (q.ok()) q.value().Bind(1, org_id).Bind(2, limit);
  return AllRows(q, [](const Stmt& r) { return OrgCheckpoint{ReadCheckpoint(r), r.Text(5), r.Text(6)}; });
}

Status Metadata::DeleteCheckpoint(const std::string& job_id, int64_t step) {
  Conn db = Lease();
  auto q = db->Prepare("DELETE FROM checkpoints WHERE job_id = ? AND step = ?");
  if (!q.ok()) return q.status();
  if (Status s = q.value().Bind(1, job_id).Bind(2, step).Run(); !s.ok()) return s;
  if (db->Changes() == 0)
    return Status(Code::kNotFound, "no checkpoint at step " + std::to_string(step) + " of " + job_id);
  return Status();
}

Status Metadata::PutWorker(const WorkerRecord& w, const std::vector<UsageRecord>& closed) {
  Conn db = Lease();
  return db->Transaction([&]() -> Status {
    if (Status s = InsertUsage(*db, closed); !s.ok()) return s;
    // seq: the order of first records (schema step 8), kept by later ones.
    auto q = db->Prepare(
        "INSERT INTO workers (id, state, record, seq) VALUES (?, ?, ?, (SELECT COALESCE(MAX(seq), 0) + 1 "
        "FROM workers)) "
        "ON CONFLICT (id) DO UPDATE SET state = excluded.state, record = excluded.record");
    if (!q.ok()) return q.status();
    return q.value().Bind(1, w.id).Bind(2, Stored(w.state)).Bind(3, WorkerToJson(w).dump()).Run();
  });
}

Result<std::vector<WorkerRecord>> Metadata::ListWorkers(bool live_only) {
  Conn db = Lease();
  auto q = db->Prepare(std::string("SELECT record FROM workers") + (live_only ? " WHERE state != ?" : "") +
                       " ORDER BY seq, id");
  if (q.ok() && live_only) q.value().Bind(1, Stored(WorkerState::kExited));
  return AllRows(q, ReadWorker);
}

Status Metadata::InsertUsage(Db& db, const std::vector<UsageRecord>& records) {
  return InsertRows(
      db,
      "INSERT INTO usage (worker_id, org_id, job_id, line, start_ms, end_ms, cost, scope, tokens, run_id, "
      "device, units) VALUES ",
      12, records.size(), [&](Stmt& q, int p, size_t i) {
        const UsageRecord& u = records[i];
        q.Bind(p, u.worker_id)
            .Bind(p + 1, u.org_id)
            .Bind(p + 2, u.job_id)
            .Bind(p + 3, Stored(u.line))
            .Bind(p + 4, u.start_ms)
            .Bind(p + 5, u.end_ms)
            .Bind(p + 6, u.cost)
            .Bind(p + 7, Stored(u.scope))
            .Bind(p + 8, u.tokens)
            .Bind(p + 9, u.run_id)
            .Bind(p + 10, u.device)
            .Bind(p + 11, u.units);
      });
}

Result<std::vector<UsageSum>> Metadata::SumUsage(const std::string& org_id, int64_t start, int64_t end) {
  Conn db = Lease();
  auto q = db->Prepare(
      "SELECT start_ms / 86400000 AS day, line, SUM(end_ms - start_ms) / 1000.0, SUM(cost), "
      "SUM(tokens), scope, device, SUM((end_ms - start_ms) * units) / 1000.0 "
      "FROM usage WHERE org_id = ?1 AND (?2 = 0 OR start_ms >= ?2 * 1000) AND (?3 = 0 OR start_ms < ?3 * "
      "1000) "
      "GROUP BY day, line, scope, device ORDER BY day, line, scope, device");
  if (q.ok()) q.value().Bind(1, org_id).Bind(2, start).Bind(3, end);
  return AllRows(q, [](const Stmt& r) -> Result<UsageSum> {
    UsageSum u{UtcDay(r.Int(0)), std::nullopt, r.Real(2), r.Real(3),
               r.Int(4),         std::nullopt, r.Text(6), r.Real(7)};
    const std::string row = "usage of " + u.day;
    UsageLine line{};
    BillingScope scope{};
    if (Status s = ReadState(r.Text(1), row, "line", &line); !s.ok()) return s;
    if (Status s = ReadState(r.Text(5), row, "scope", &scope); !s.ok()) return s;
    u.line = line;
    u.scope = scope;
    return u;
  });
}

Result<UsageSum> Metadata::JobUsage(const std::string& job_id) {
  Conn db = Lease();
  auto q = db->Prepare(
      "SELECT COALESCE(SUM(end_ms - start_ms), 0) / 1000.0, COALESCE(SUM(cost), 0), COALESCE(SUM(tokens), 0) "
      "FROM usage WHERE job_id = ?");
  if (q.ok()) q.value().Bind(1, job_id);
  return OneRow(
      q,
      [](const Stmt& r) {
        return UsageSum{"", std::nullopt, r.Real(0), r.Real(1), r.Int(2), std::nullopt, "", 0};
      },
      Status());
}

Result<std::vector<UsageSum>> Metadata::UsageByRun(const std::string& org_id, int64_t start, int64_t end) {
  Conn db = Lease();
  auto q = db->Prepare(
      "SELECT run_id, line, SUM(end_ms - start_ms) / 1000.0, SUM(cost), SUM(tokens), MIN(start_ms) FROM "
      "usage "
      "WHERE org_id = ?1 AND (?2 = 0 OR start_ms >= ?2 * 1000) AND (?3 = 0 OR start_ms < ?3 * 1000) "
      "GROUP BY run_id, line ORDER BY MIN(start_ms)");
  if (q.ok()) q.value().Bind(1, org_id).Bind(2, start).Bind(3, end);
  return AllRows(q, [](const Stmt& r) -> Result<UsageSum> {
    UsageSum u{r.Text(0), std::nullopt, r.Real(2), r.Real(3), r.Int(4), std::nullopt, "", 0};
    UsageLine line{};
    if (Status s = ReadState(r.Text(1), "usage of run \"" + u.day + "\"", "line", &line); !s.ok()) return s;
    u.line = line;
    return u;
  });
}

Result<std::map<std::string, std::map<UsageLine, int64_t>>> Metadata::UsageByWorker(
    const std::string& org_id) {
  Conn db = Lease();
  auto q = db->Prepare(
      "SELECT worker_id, line, SUM(end_ms - start_ms) FROM usage WHERE org_id = ? GROUP BY worker_id, line");
  if (q.ok()) q.value().Bind(1, org_id);
  auto rows = AllRows(q, [](const Stmt& r) -> Result<std::tuple<std::string, UsageLine, int64_t>> {
    UsageLine line{};
    if (Status s = ReadState(r.Text(1), "usage of worker " + r.Text(0), "line", &line); !s.ok()) return s;
    return std::make_tuple(r.Text(0), line, r.Int(2));
  });
  if (!rows.ok()) return rows.status();
  std::map<std::string, std::map<UsageLine, int64_t>> out;
  for (const auto& [w, line, ms] : rows.value()) out[w][line] = ms;
  return out;
}

Result<std::vector<UsageRecord>> Metadata::WorkerUsage(const std::string& worker_id) {
  Conn db = Lease();
  auto q = db->Prepare(
      "SELECT worker_id, org_id, job_id, line, start_ms, end_ms, cost, scope, tokens, run_id, device, units "
      "FROM usage WHERE worker_id = ? ORDER BY seq");
  if (q.ok()) q.value().Bind(1, worker_id);
  return AllRows(q, [](const Stmt& r) -> Result<UsageRecord> {
    UsageRecord u{r.Text(0), r.Text(1), r.Text(2),  UsageLine::kStartup,
                  r.Int(4),  r.Int(5),  r.Real(6),  BillingScope::kDedicated,
                  r.Int(8),  r.Text(9), r.Text(10), r.Int(11)};
    const std::string row = "usage of worker " + u.worker_id;
    if (Status s = ReadState(r.Text(3), row, "line", &u.line); !s.ok()) return s;
    if (Status s = ReadState(r.Text(7), row, "scope", &u.scope); !s.ok()) return s;
    return u;
  });
}

}  // namespace burst
