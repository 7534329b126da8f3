// Metadata: the control plane's durable records, on SQLite or PostgreSQL
// (db/db.h): the same SQL, schema steps and behaviour on both.
//
// Organisations and their API keys, files, jobs, attempts, events, logs,
// checkpoints, workers and the usage ledger, sweeps, deployments and the
// leader lease (db/README.md says which file holds which). A key is shown to its
// owner once, when created; the database keeps only its sha256, so a leaked
// database file does not leak usable keys. The schema grows by numbered
// migration steps, never by editing a step that has shipped.
//
// Thread-safety: one Metadata may be shared by all of the server's threads.
// Each call holds one connection of a pool for its duration (four; one for
// an in-memory SQLite), so that reads of several requests run at once;
// writes in Transaction are serialized on the database either way
// (db/db.h: SQLite's BEGIN IMMEDIATE with its busy timeout, PostgreSQL's
// advisory lock).
// Errors: Status/Result (kNotFound for unknown ids and keys). Statuses,
// states, outcomes, lines and scopes are stored by their names
// (core/states.h); a row holding a name this binary does not know is
// kDataLoss naming the row, never a guess.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "core/json.h"
#include "core/states.h"
#include "core/status.h"
#include "db/db.h"

namespace burst {

struct Org {
  std::string id;  // "org-..."
  std::string name;
  int64_t created_at = 0;  // unix seconds
};

struct ApiKey {
  std::string id;  // "key-..."; names the key in lists and logs
  std::string org_id;
  std::string name;
  std::string prefix;  // the secret's first 12 characters, to recognise it
  int64_t created_at = 0;
  bool revoked = false;
};

struct NewApiKey {
  ApiKey key;
  std::string secret;  // "burst-...": returned once, never stored
};

// An uploaded file (OpenAI's File object, plus what Burst checked).
struct FileRecord {
  std::string id;  // "file-..."
  std::string org_id;
  std::string filename;
  std::string purpose;  // "fine-tune"
  int64_t bytes = 0;
  std::string sha256;
  std::string format;  // from the upload check: messages, text, preference, ...
  int64_t examples = 0;
  int64_t created_at = 0;
  std::string object_key;  // where the bytes are in the ObjectStore
};

// A fine-tuning job (docs/api.md). `spec` is what the request fixed (the
// validated body, the resolved recipe, the files' object keys); the rest is
// the job's progress, written by the runtime.
struct JobRecord {
  std::string id;  // "ftjob-..."
  std::string org_id;
  JobStatus status = JobStatus::kQueued;
  int64_t created_at = 0, started_at = 0, finished_at = 0;  // unix seconds; 0 = not yet
  std::string idempotency_key, request_sha256;
  Json spec = Json::object();
  int64_t attempts = 0;       // attempts started so far
  int64_t retries = 0;        // retries spent (lost or transient failures)
  int64_t not_before_ms = 0;  // backoff: not dispatched before this (unix ms)
  int64_t step = 0, total_steps = 0, trained_tokens = 0;
  int64_t resume_step = 0;  // newest committed state checkpoint (0 = none)
  double run_seconds = 0;   // time spent in finished attempts (for timeout_s)
  std::string fine_tuned_model;
  Json error;   // null, or {code, message, param}
  Json result;  // null, or {baseline, final, train_loss} reported by the worker
  // spec.kind: kTrain (the default) or kEval.
  // train (a spec without a kind too), eval or batch.
  TaskKind kind() const {
    const std::string k = spec.is_object() ? spec.value("kind", "") : "";
    if (k == ToString(TaskKind::kEval)) return TaskKind::kEval;
    if (k == ToString(TaskKind::kBatch)) return TaskKind::kBatch;
    return TaskKind::kTrain;
  }
};

struct AttemptRecord {
  std::string job_id;
  int64_t attempt = 0;
  std::string worker_id;
  int64_t started_ms = 0, ended_ms = 0;   // 0 = still running
  std::optional<AttemptOutcome> outcome;  // none while running
  Json error;
  int64_t resumed_from = 0;
  // A cold start's phases before the attempt (0 on a warm worker): waiting
  // in the executor's queue (Slurm's PENDING; not billed), then the worker
  // process starting up until it registered.
  int64_t queued_ms = 0, startup_ms = 0;
};

struct EventRecord {
  int64_t seq = 0;
  std::string job_id;
  int64_t created_at = 0;
  std::string level = "info", type = "message", message;
  Json data;
};

struct LogRecord {
  int64_t seq = 0;
  std::string job_id;
  int64_t attempt = 0, created_at = 0;
  std::string text;
};

struct CheckpointRecord {
  std::string job_id;
  int64_t step = 0, created_at = 0;
  Json metrics = Json::object();
  std::string prefix;  // object-store folder holding sampler/ and state/
};

// A worker process, from its start request to its observed exit.
struct WorkerRecord {
  std::string id;  // "wrk-..."
  std::string token_sha256;
  WorkerState state = WorkerState::kStarting;
  int64_t slot = 0, pid = 0;
  std::string model;   // base model loaded ("" = none yet)
  std::string job_id;  // task in hand
  int64_t attempt = 0;
  int64_t requested_ms = 0, started_ms = 0, exited_ms = 0, since_ms = 0, heartbeat_ms = 0;
  // Time in the cluster's queue: from the start request until the process
  // began (Slurm's pending time; ~0 for local workers). Never billed.
  int64_t queued_ms = 0;
  std::string exit_reason;
  // The open usage segment (closed into `usage` at each change); no line
  // when none is open (before the start request, after the exit).
  std::optional<UsageLine> seg_line;
  std::string seg_org, seg_job;
  BillingScope seg_scope = BillingScope::kDedicated;
  std::string seg_run;
  int64_t seg_start_ms = 0;
  BillingScope last_scope = BillingScope::kDedicated;  // scope of the work served last (idle time follows it)
  std::string last_run;                                // run of the work served last (idle time counts to it)
  std::string last_org;                                // organisation served last (idle time is billed to it)
  std::string deployment;  // the deployment this worker is a replica of ("" = none)
  // What it runs on: "cpu" (CPU slot `slot`), or a GPU type, with the GPUs
  // it holds (their indices on this machine; on Slurm, ordinals) and no
  // CPU slot (slot -1).
  std::string device = "cpu";
  std::vector<int64_t> gpus;
};

// One closed stretch of a worker's life, billed to one organisation.
// Or, in serverless scope, a token charge (worker_id "", start = end, the
// tokens priced per million): the worker time of serverless work is
// recorded at cost 0 and its tokens are billed instead.
struct UsageRecord {
  std::string worker_id, org_id, job_id;
  UsageLine line = UsageLine::kStartup;
  int64_t start_ms = 0, end_ms = 0;
  double cost = 0;
  BillingScope scope = BillingScope::kDedicated;
  int64_t tokens = 0;  // a token charge's tokens
  std::string run_id;  // the fine-tuning job the spend belongs to ("" = none: a base model)
  // What the worker held: "cpu" (one slot) or a GPU type, `units` of it
  // (its GPUs); device-seconds = (end - start) x units. A token charge's
  // is "cpu" x 1.
  std::string device = "cpu";
  int64_t units = 1;
};

// A sum over usage records. `line` and `scope` are those of the records
// summed when the query groups by them, else none.
struct UsageSum {
  std::string day;
  std::optional<UsageLine> line;
  double seconds = 0, cost = 0;
  int64_t tokens = 0;
  std::optional<BillingScope> scope;
  std::string device;         // when the query groups by it ("cpu" or a GPU type)
  double device_seconds = 0;  // seconds x units (GPU-seconds for a GPU type)
};

// A sweep (docs/api.md, "Sweeps"): one job body fanned out over a grid of
// values or a list of runs. `runs` lists {"job_id", "overrides"} in point
// order; the jobs are ordinary jobs whose spec carries "sweep_id".
struct SweepRecord {
  std::string id;  // "sweep-..."
  std::string org_id;
  int64_t created_at = 0;  // unix seconds
  std::string idempotency_key, request_sha256;
  Json request = Json::object();  // the body as given
  Json runs = Json::array();      // [{"job_id", "overrides"}]
  int64_t cancelled_at = 0;       // unix seconds; 0 = not cancelled
};

// A deployment (docs/api.md, "Deployments"): a name that routes sampling
// calls to one checkpoint, served by replicas that scale between
// min_replicas and max_replicas. `request` is the body with every default
// filled in (the idempotency comparison is on it); `target` is what the
// checkpoint resolved to when it was created ({base_model, checkpoint_prefix,
// full, checkpoint, model}), so a deployment never changes what it serves.
struct DeploymentRecord {
  std::string id;  // "dep-..."
  std::string org_id, name;
  int64_t created_at = 0, deleted_at = 0;  // unix seconds; deleted_at 0 = live
  std::string request_sha256;
  Json request = Json::object();
  Json target = Json::object();
  int64_t requests = 0, cold_starts = 0, last_request_ms = 0;  // calls answered
};

// The billing scope a job's spec or a deployment's target fixed when it was
// created ("dedicated" when absent: records from before scopes existed);
// kDataLoss naming `what` ("job ftjob-...") for a name this binary does not
// know.
Result<BillingScope> RecordedScope(const Json& spec_or_target, const std::string& what);

// Who holds the leader lease (db/leader.cpp).
struct LeaderLease {
  bool held = false;       // by the caller, after this call
  std::string holder;      // the holder's identity ("" = nobody yet)
  std::string url;         // where the holder answers
  int64_t expires_ms = 0;  // unix ms; the holder must renew before
  int64_t term = 0;        // +1 each time another holder takes it
};

class Metadata {
 public:
  // Opens and migrates the database `url` names (Db::Open: a file path,
  // created when missing, ":memory:" for tests, sqlite:///abs/path, or
  // postgresql://... for a server shared by several control planes). A bad
  // URL is kInvalidArgument naming the `database` setting; a server that
  // cannot be reached is kUnavailable.
  static Result<std::unique_ptr<Metadata>> Open(const std::string& url);

  Result<Org> CreateOrg(const std::string& name);
  Result<Org> GetOrg(const std::string& id);
  Result<std::vector<Org>> ListOrgs();

  Result<NewApiKey> CreateApiKey(const std::string& org_id, const std::string& name);
  // The organisation a presented secret belongs to; kNotFound for unknown or
  // revoked keys (the caller answers 401 either way).
  Result<ApiKey> Authenticate(const std::string& secret);
  Status RevokeApiKey(const std::string& org_id, const std::string& key_id);
  Result<std::vector<ApiKey>> ListApiKeys(const std::string& org_id);

  // Files. Every lookup is by organisation too: another organisation's file
  // is kNotFound, exactly like a missing one.
  // Stamps file.created_at.
  Status CreateFile(FileRecord& file);
  Result<FileRecord> GetFile(const std::string& org_id, const std::string& id);
  // Newest first; `after` (a file id) continues a previous page.
  Result<std::vector<FileRecord>> ListFiles(const std::string& org_id, const std::string& after,
                                            int64_t limit);
  Status DeleteFile(const std::string& org_id, const std::string& id);

  // Jobs (db/jobs.cpp). CreateJob stamps created_at; with an idempotency key
  // already used by the organisation it returns that job when the request
  // hashes the same (created = false) and kAlreadyExists otherwise.
  // `events` (the job's first) are written in the same transaction.
  Result<JobRecord> CreateJob(JobRecord job, bool* created, const std::vector<EventRecord>& events = {});
  // Several at once, in one transaction (one commit: the runtime's group
  // commit of submissions arriving together). Each entry gets its own
  // answer, as CreateJob's: its job (created or replayed) or its key's
  // conflict. A failure of the transaction itself is returned, and then no
  // entry was written.
  struct NewJob {
    JobRecord job;
    std::vector<EventRecord> events;
    Result<JobRecord> result = Status(Code::kInternal, "not written");  // filled by CreateJobs
    bool created = false;                                               // filled by CreateJobs
  };
  Status CreateJobs(std::vector<NewJob>& jobs);
  Status UpdateJob(const JobRecord& job);  // the progress fields
  Result<JobRecord> GetJob(const std::string& org_id, const std::string& id);
  Result<JobRecord> GetJobById(const std::string& id);  // internal: any organisation
  // The job an earlier request with this Idempotency-Key created, when its
  // body hashed the same; nullopt when the key is new; kAlreadyExists when it
  // was used with another body.
  Result<std::optional<JobRecord>> IdempotentReplay(const std::string& org_id, const std::string& key,
                                                    const std::string& request_sha256);
  // Jobs of one kind (spec.kind: train, the default, or eval).
  Result<std::vector<JobRecord>> ListJobs(const std::string& org_id, const std::string& after, int64_t limit,
                                          TaskKind kind = TaskKind::kTrain);
  // Jobs in queued or running state, oldest first (to rebuild the queue on start).
  Result<std::vector<JobRecord>> ListActiveJobs();

  Status AddAttempt(const AttemptRecord& a);
  Status EndAttempt(const std::string& job_id, int64_t attempt, int64_t ended_ms, AttemptOutcome outcome,
                    const Json& error);
  Result<std::vector<AttemptRecord>> ListAttempts(const std::string& job_id);
  Result<std::vector<AttemptRecord>> ListOpenAttempts();  // not ended yet, any job

  Status AddEvents(const std::vector<EventRecord>& events);
  // Events after `after` (an event id, "" = from the start) in the given order.
  Result<std::vector<EventRecord>> ListEvents(const std::string& job_id, const std::string& after,
                                              int64_t limit, bool ascending);
  Status AddLogs(const std::vector<LogRecord>& logs);
  Result<std::vector<LogRecord>> ListLogs(const std::string& job_id, int64_t after_seq, int64_t limit);

  Status AddCheckpoint(const CheckpointRecord& c);  // replaces the same step's row
  Result<std::vector<CheckpointRecord>> ListCheckpoints(const std::string& job_id, int64_t before_step,
                                                        int64_t limit);  // newest first
  // An organisation's checkpoints across its fine-tuning jobs (not
  // evaluations), newest job first and each job's newest step first, at
  // most `limit`, each with its job's base model (spec.model) and suffix: GET
  // /v1/models in one query.
  struct OrgCheckpoint {
    CheckpointRecord checkpoint;
    std::string base_model;
    std::string suffix;  // spec.suffix ("" = none)
  };
  Result<std::vector<OrgCheckpoint>> ListOrgCheckpoints(const std::string& org_id, int64_t limit);
  // Forgets a job's checkpoint at `step` (its objects are the caller's to
  // delete); kNotFound when there is none.
  Status DeleteCheckpoint(const std::string& job_id, int64_t step);

  // Inserts or replaces the worker and closes the usage segments that ended
  // with its change, in one transaction: a crash never keeps a segment
  // without the record that moved past it (which would bill it twice).
  Status PutWorker(const WorkerRecord& w, const std::vector<UsageRecord>& closed = {});
  Result<std::vector<WorkerRecord>> ListWorkers(bool live_only);

  // Deployments (db/deployments.cpp). Names are unique among an
  // organisation's live deployments: creating a live name again returns it
  // (created = false) when the request hashes the same, and kAlreadyExists
  // otherwise.
  Result<DeploymentRecord> CreateDeployment(DeploymentRecord d, bool* created);
  // By id or by live name; kNotFound names the deployment.
  Result<DeploymentRecord> GetDeployment(const std::string& org_id, const std::string& id_or_name);
  // Newest first; deleted ones too when include_deleted. org_id "" = every
  // organisation's (the runtime's recovery).
  Result<std::vector<DeploymentRecord>> ListDeployments(const std::string& org_id, bool include_deleted);
  Status MarkDeploymentDeleted(const std::string& id, int64_t deleted_at);
  // Counts one answered call (and whether it waited for a cold start).
  Status CountDeploymentRequest(const std::string& id, int64_t at_ms, bool cold);

  // Sums of the organisation's ledger by UTC day and line, for days in [start, end] (unix s; 0 = open).
  Result<std::vector<UsageSum>> SumUsage(const std::string& org_id, int64_t start, int64_t end);
  // Seconds and cost attributed to one job.
  Result<UsageSum> JobUsage(const std::string& job_id);
  // An organisation's spend by run (the fine-tuning job it belongs to; "" =
  // none) and line, between unix seconds start and end (0: open); UsageSum.day
  // holds the run id.
  Result<std::vector<UsageSum>> UsageByRun(const std::string& org_id, int64_t start = 0, int64_t end = 0);
  // Milliseconds billed to one organisation, by worker and line.
  Result<std::map<std::string, std::map<UsageLine, int64_t>>> UsageByWorker(const std::string& org_id);
  // Every closed segment of one worker, oldest first (tests and audits).
  Result<std::vector<UsageRecord>> WorkerUsage(const std::string& worker_id);

  // Sweeps (db/sweeps.cpp). CreateSweep stamps created_at; an idempotency
  // key works as for CreateJob (same body: that sweep, created = false;
  // another body: kAlreadyExists).
  Result<SweepRecord> CreateSweep(SweepRecord sweep, bool* created);
  Result<SweepRecord> GetSweep(const std::string& org_id, const std::string& id);
  // The organisation's sweep created with this idempotency key (nullopt: none).
  Result<std::optional<SweepRecord>> FindSweepByKey(const std::string& org_id, const std::string& key);
  // Newest first; `after` (a sweep id) continues a previous page.
  Result<std::vector<SweepRecord>> ListSweeps(const std::string& org_id, const std::string& after,
                                              int64_t limit);
  // Stamps cancelled_at once; false when the sweep was already cancelled.
  Result<bool> CancelSweep(const std::string& org_id, const std::string& id, int64_t at);

  // The leader lease (db/leader.cpp): one row deciding which of the control
  // planes sharing this database is active. TryLead takes the lease when
  // nobody holds it, when it expired, or when `holder` holds it already
  // (renewal), for ttl_ms from now_ms; otherwise it reports the holder.
  // In one transaction, so two contenders never both win. Clocks of the
  // contending hosts must agree to well within the TTL (NTP).
  Result<LeaderLease> TryLead(const std::string& holder, const std::string& url, int64_t now_ms,
                              int64_t ttl_ms);
  // Gives the lease up (a clean shutdown) so a standby takes over at once;
  // nothing when `holder` does not hold it.
  Status Resign(const std::string& holder);

 private:
  explicit Metadata(std::vector<std::unique_ptr<Db>> pool);
  Status InsertUsage(Db& db, const std::vector<UsageRecord>& records);  // in the caller's transaction

  // A connection of the pool, held for one call (released when it goes).
  class Conn {
   public:
    Conn(Metadata& md, std::unique_ptr<Db> db) : md_(md), db_(std::move(db)) {}
    Conn(const Conn&) = delete;
    Conn& operator=(const Conn&) = delete;
    ~Conn() { md_.Release(std::move(db_)); }
    Db* operator->() const { return db_.get(); }
    Db& operator*() const { return *db_; }

   private:
    Metadata& md_;
    std::unique_ptr<Db> db_;
  };
  // Waits for a free connection.
  Conn Lease();
  void Release(std::unique_ptr<Db> db);

  std::mutex pool_mu_;
  std::condition_variable pool_cv_;
  std::vector<std::unique_ptr<Db>> idle_;  // GUARDED_BY(pool_mu_)
};

// Connections a Metadata holds: on PostgreSQL, on an SQLite file (an
// in-memory SQLite: one).
inline constexpr int kPgConnections = 4;
inline constexpr int kSqliteConnections = 4;

// The schema, one migration step per element (db/metadata.cpp).
const std::vector<std::string>& MetadataSchema();

}  // namespace burst
