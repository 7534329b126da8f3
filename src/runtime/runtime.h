// Runtime: the control plane's scheduler, leases and metering.
//
// Jobs wait in one queue per organisation. Dispatch gives the next task to
// the organisation with the fewest tasks running (ties: the one waiting
// longest), to an idle worker that computes with the BLAS its state
// checkpoint was written with (a resumed task: BlasFacts), then to one that
// already has the task's base model loaded, else to any idle worker, else
// it asks the executor for a new worker while slots are free. More tasks
// than slots wait; they never fail for it.
//
// A running task holds a lease that the worker's heartbeats renew. A lease
// that lapses, or a worker whose exit the executor observed while it held a
// task, ends the attempt as `lost`: the task goes back to its queue with
// attempt+1 after an exponential backoff, and resumes from the newest
// committed state checkpoint; after `max_retries` such retries the job
// fails. A preempted attempt (SIGTERM to the worker) is requeued at once and
// costs no retry.
//
// Metering: each worker's life, from the start request to the observed exit,
// is cut into segments (startup, training, idle), each billed to one
// organisation (idle time to the one served last); the segments of a worker
// add up to its observed lifetime exactly.
//
// Everything durable goes to Metadata before a call returns; Recover()
// rebuilds the queues from it after a restart, adopting workers that
// survived.
//
// A write to the database that fails is never dropped silently: it is
// returned to the caller, or (where no caller can act on it, e.g. inside a
// dispatch round) logged on stderr with what failed; a worker's record and
// the usage segments it closed stay in memory and are written again at the
// next save or tick until a write succeeds.
//
// Thread-safety: all public methods may be called from any thread. The
// scheduler's lock (mu_) guards what one dispatch decision weighs together:
// the jobs (JobQueue, job_queue.h), the workers (WorkerPool), the calls waiting
// (SampleQueue) and the deployments (DeploymentTable) with their
// replicas. The workers' tokens have a lock of their own (WorkerTokens,
// worker_tokens.h): authenticating a worker's request never waits for a
// dispatch round. Usage segments are cut and written by the Meter
// (meter.h), which keeps exited workers' unwritten usage under a lock of
// its own. Lease(), Sample() and NextChunks() wait without holding the
// scheduler's lock; every wait's deadline is a time on the injected Clock.
//
// The implementation is split by subject, one source file each
// (runtime/README.md).
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "core/json.h"
#include "core/states.h"
#include "db/metadata.h"
#include "runtime/blas_facts.h"
#include "runtime/deployment_table.h"
#include "runtime/executor.h"
#include "runtime/gpu_request.h"
#include "runtime/job_queue.h"
#include "runtime/meter.h"
#include "runtime/sample_queue.h"
#include "runtime/worker_call.h"
#include "runtime/worker_pool.h"
#include "runtime/worker_tokens.h"

namespace burst {

struct RuntimeOptions {
  int slots = 1;
  int threads_per_slot = 1;
  int64_t scaledown_window_ms = 60'000;
  int64_t lease_ttl_ms = 10'000;
  int64_t stop_grace_ms = 30'000;  // SIGTERM to SIGKILL
  std::string slot_type = "cpu";
  double price_per_slot_second = 0.00005;
  // The GPUs workers may hold (each a slot of its type, beside the CPU
  // slots), and the price of one GPU-second by type (every type here has one).
  std::vector<GpuSlot> gpus;
  std::map<std::string, double> price_per_gpu_second;
  // Serverless scope: tokens instead of slot-seconds, per million.
  double price_train_per_mtok = 0.05, price_prefill_per_mtok = 0.02, price_sample_per_mtok = 0.05;
  // A batch's tokens (OpenAI's Batch API: half the online prices by default).
  double price_batch_prefill_per_mtok = 0.01, price_batch_sample_per_mtok = 0.025;
  std::string store_url;  // told to workers at registration
  // Per-organisation caps (0 = none): jobs queued or running, and sampling
  // calls in flight. Over a cap is 429 org_cap, which retrying does not fix.
  int max_active_jobs_per_org = 0;
  int max_sampling_calls_per_org = 0;
  int max_deployments_per_org = 0;  // live deployments
  // Slots one organisation's deployments may hold live (the sum of their
  // min_replicas; -1: half the slots, rounded down, so a reserved pool
  // never shuts everyone else out).
  int max_min_replicas_per_org = -1;
  // Sampling calls one organisation may have waiting for a worker at once;
  // more answer 429 capacity at once (another organisation's have their own
  // share of the queue).
  int64_t max_waiting_samples = 8;
  // Pool workers one organisation's sampling and loop calls may hold at
  // once while another organisation has sampled in the last 10 minutes (0:
  // no cap); its other calls wait for those, or join their batches, so the
  // rest of the pool stays free for other organisations' calls.
  int max_sampling_workers_per_org = 0;
  // Sampling calls a pool worker decodes as one batch (calls of the same
  // organisation on the same weights join a worker already sampling them);
  // a deployment's replicas take max_concurrency each.
  int max_batch_calls = 8;
  // One job on many workers: what "communication": "auto" means here
  // ("c10d" where the workers reach each other, else "store"), and how long
  // a member waits for the others (rendezvous, each exchange).
  std::string auto_communication = "c10d";
  int64_t member_timeout_ms = 120'000;
  // The devices a sampling or loop call on a base model (its folder, and
  // the name its caller used) runs on: empty for a CPU worker, else GPU
  // claims in order of preference (the model's catalog entry resolved
  // against the pool; api/models.h). Its error answers the call. Unset:
  // every such call runs on a CPU worker.
  std::function<Result<std::vector<DeviceClaim>>(const std::string& base_model,
                                                 const std::string& model_name)>
      call_devices;
};

class Runtime {
 public:
  Runtime(Metadata& md, Executor& executor, Clock& clock, RuntimeOptions options);
  ~Runtime();

  // Rebuilds queues and the worker pool from the database (after a restart).
  Status Recover();
  // Runs Tick() every `period_ms` on a thread of its own until Shutdown().
  void StartTicker(int64_t period_ms = 100);
  // Stops the ticker; with stop_workers, asks every worker to leave
  // (SIGTERM, so running tasks checkpoint) and waits up to `wait_ms` for
  // their exits.
  void Shutdown(bool stop_workers, int64_t wait_ms);

  // --- the public API's side ---
  // `job.spec` holds the validated request; `job.spec["model"]` names the
  // base model (warm reuse is by this name). Queues it.
  // Over the organisation's max_active_jobs_per_org: kResourceExhausted with
  // reason "org_cap", param "max_active_jobs" (a replay of an accepted
  // request is answered with its job instead).
  Result<JobRecord> Submit(JobRecord job, bool* created);
  // A sweep and its jobs, the organisation's cap checked once for all of
  // them under the scheduler's lock (two sweeps at once never pass it
  // together). `jobs[i]` is run i's job (spec, total_steps, request_sha256);
  // its id is sweep.runs[i].job_id, its idempotency key "SWEEPID/i" and
  // spec.sweep_id is set here. The sweep is idempotent on (org,
  // idempotency_key) as Metadata::CreateSweep: a replay of an accepted sweep
  // is not new (created = false) and creates the jobs an interrupted request
  // did not. A new sweep over the cap is refused (reason org_cap, param
  // max_active_jobs) before anything exists; a new sweep one of whose jobs
  // cannot be submitted is cancelled with the jobs it already made.
  Result<SweepRecord> SubmitSweep(SweepRecord sweep, std::vector<JobRecord> jobs, bool* created);
  Result<JobRecord> Cancel(const std::string& org_id, const std::string& job_id);
  // Pause: a queued job leaves the queue; a running one is told to stop (its
  // worker writes a state checkpoint first, as for a preemption) and is not
  // requeued. Resume queues a paused job again, to go on from its last state
  // checkpoint. kFailedPrecondition for a job in another state.
  Result<JobRecord> Pause(const std::string& org_id, const std::string& job_id);
  Result<JobRecord> Resume(const std::string& org_id, const std::string& job_id);
  // The live pool as `org_id` may see it: its own work in full (the model by
  // the name it used, never the server's folder), any other organisation's
  // work only as {"id", "object", "state": "busy", "slot"}.
  Json WorkersJson(const std::string& org_id);
  const RuntimeOptions& options() const { return opt_; }
  // What requests are checked against: the GPUs by type, the CPU slots.
  SlotPool Pool() const { return PoolOf(opt_.gpus, opt_.slots, opt_.threads_per_slot); }
  // The clock the scheduler runs on (the API reads the time from it too).
  Clock& clock() { return clock_; }

  // --- the workers' side (/internal/v1) ---
  // The worker a token belongs to; kNotFound for unknown or exited workers.
  Result<std::string> AuthenticateWorker(const std::string& token);
  // process_started_ms: when the worker's process began (its clock; 0 =
  // unknown): the time before it, since the executor was asked, is queue
  // time (Slurm's PENDING), neither billed nor start-up.
  // `blas`: what the worker computes with; dispatch prefers it for a task
  // whose state checkpoint was written with the same.
  // `device`: what the worker says it runs on ("cpu" or its GPU type; ""
  // = not said): another than it was started for is kFailedPrecondition.
  Result<Json> Register(const std::string& worker_id, int64_t pid, int64_t process_started_ms = 0,
                        const BlasFacts& blas = {}, const std::string& device = "");
  // Waits up to wait_ms for a task assigned to this worker (nullopt: none).
  // `checkpoints`: the checkpoint prefixes the worker holds loaded; a
  // deployment's replica holding its deployment's is ready (DeploymentState).
  // `held`: the affinity keys it holds (loop sessions kept in memory); one
  // that DropHeld named is answered {"action": "drop", "loops": [keys]} at
  // once, for the worker to let them go.
  // A worker decoding a batch of sampling calls: the next sampling call
  // assigned to it and not yet handed over (nullopt: none now; it does not
  // wait). Once its batch has emptied the worker is idle, so such a call may
  // be for other weights; other kinds of work wait for its next Lease.
  Result<std::optional<Json>> JoinSample(const std::string& worker_id);
  // The work behind affinity key `key` is over (a training run its owner
  // deactivated): a worker that reports holding it is told to let it go
  // (Lease), freeing its memory. The last kMaxDropped keys are kept.
  void DropHeld(const std::string& key);
  static constexpr size_t kMaxDropped = 4096;
  Result<std::optional<Json>> Lease(const std::string& worker_id, const std::string& loaded_model,
                                    int64_t wait_ms, const std::vector<std::string>& checkpoints = {},
                                    const std::vector<std::string>& held = {});
  // "continue" or "cancel"; kFailedPrecondition (409 lease_lost) when the
  // attempt is no longer this worker's.
  Result<std::string> Heartbeat(const std::string& worker_id, const std::string& job_id, int64_t attempt,
                                int64_t step);
  Status Events(const std::string& worker_id, const std::string& job_id, int64_t attempt,
                std::vector<EventRecord> events, std::vector<std::string> logs);
  // `blas`: what the step's state checkpoint was written with (a task on
  // the CPU; unknown otherwise): a later attempt goes to a worker with the
  // same where one is idle.
  Status Checkpoint(const std::string& worker_id, const std::string& job_id, int64_t attempt, int64_t step,
                    const Json& metrics, const BlasFacts& blas = {});
  // outcome: the worker's name for how the attempt ended (completed,
  // preempted, failed or cancelled); anything else is kInvalidArgument.
  Status Finish(const std::string& worker_id, const std::string& job_id, int64_t attempt,
                const std::string& outcome, const Json& error, bool retryable, int64_t step,
                int64_t trained_tokens, const Json& result = Json());
  Status WorkerExiting(const std::string& worker_id, const std::string& reason);
  // One job on many workers, c10d: rank 0 publishes its rendezvous address
  // (`address` non-empty); another member gets it, waiting up to wait_ms
  // ("" when not yet published). kFailedPrecondition (lease_lost) when the
  // attempt is no longer this worker's; rank 0's address is refused from
  // any other rank.
  Result<std::string> Rendezvous(const std::string& worker_id, const std::string& job_id, int64_t attempt,
                                 const std::string& address, int64_t wait_ms);

  // A call to a worker (a sampling request, or a training loop's request:
  // WorkerCall): queues it and waits up to wait_ms for its answer. A call
  // still waiting for a worker then is dropped with kResourceExhausted
  // ("capacity"); one running is answered when it finishes.
  // With until_started, returns as soon as a worker has taken the call (or
  // with the capacity error); then NextChunks streams it.
  std::shared_ptr<WorkerCall> Sample(std::shared_ptr<WorkerCall> call, int64_t wait_ms,
                                     bool until_started = false);
  // The chunks a streaming call has produced since the last call, waiting up
  // to wait_ms for one; *done once the call is over and nothing is left.
  std::vector<Json> NextChunks(const std::shared_ptr<WorkerCall>& call, int64_t wait_ms, bool* done);
  // The caller has gone (a closed stream): a call still waiting for a worker
  // is dropped from its queue (done, kCancelled); one assigned but not yet
  // taken goes back and frees its worker at once; one running is marked
  // cancelled, its worker learns it from SampleChunks and answers with what
  // it sampled so far (billed as such). Nothing for a call already done.
  void CancelCall(const std::shared_ptr<WorkerCall>& call);
  // A worker's streamed pieces. *cancel: stop sampling (the call was
  // cancelled; the pieces are dropped); the worker then sends its
  // sample_result. The worker posts at least every ~250 ms while it
  // samples, an empty list being a keep-alive.
  Status SampleChunks(const std::string& worker_id, const std::string& call_id, const Json& chunks,
                      bool* cancel);
  Status SampleChunks(const std::string& worker_id, const std::string& call_id, const Json& chunks);
  // The worker's answer: result, or error (an {code, message, param} object).
  Status SampleResult(const std::string& worker_id, const std::string& call_id, const Json& result,
                      const Json& error);

  // Deployments (docs/api.md, "Deployments"). Create writes the record and
  // brings up min_replicas; the same live name with the same request returns
  // the existing one (created = false), another request is kAlreadyExists.
  // Calls whose WorkerCall.deployment names it go to its replicas only; a
  // replica is a worker held by the deployment, its whole time billed on the
  // usage line "deployment" (job_id = the deployment's id). Replicas are
  // added while the calls in flight exceed max_concurrency per replica (up
  // to max_replicas) and stopped after scaledown_window_s without a call
  // (down to min_replicas). Delete stops every replica at once.
  Result<DeploymentRecord> CreateDeployment(DeploymentRecord d, bool* created);
  Result<DeploymentRecord> DeleteDeployment(const std::string& org_id, const std::string& id_or_name);
  // Live state: {"replicas": [{worker, device, state, ready, since}], "waiting", "busy",
  // "open_seconds" and "open_cost" (of segments not yet closed into usage)}.
  // `scope`: the deployment's (its open replica time is free in serverless).
  Json DeploymentState(const std::string& id, BillingScope scope);

  // Expires leases and timeouts, observes worker exits, dispatches, starts
  // workers. Called by the ticker and after each change; tests call it.
  void Tick();

  // Inspection (tests, benchmarks).
  size_t QueuedCount();
  size_t LiveWorkerCount();
  // What the metrics scrape reads (core/metrics.h): jobs queued and running
  // by organisation, live workers by state and device ("cpu" or a GPU
  // type), and the pool's GPUs by type, held or free.
  struct Gauges {
    std::map<std::string, int64_t> queued_by_org, running_by_org;
    std::map<std::pair<std::string, std::string>, int64_t> workers_by_state_device;
    std::map<std::pair<std::string, std::string>, int64_t> gpus_by_type_state;  // {type, "held"|"free"}
  };
  Gauges ReadGauges();
  // Duration of the last dispatch decision that assigned a task or started a
  // worker (ns; the choice only, not its database writes), for the benchmark.
  int64_t last_dispatch_ns();

 private:
  using Task = JobTask;
  using Worker = PoolWorker;
  // Assigns waiting deployment calls to free replicas and adds a replica when
  // the load asks for one; false when nothing changed.
  bool DispatchDeployments(int64_t now);
  // Adds a created or recovered deployment to the table, with its devices.
  Status AddDeployment(const DeploymentRecord& rec);
  // Replicas of a deployment that are not on their way out.
  int LiveReplicas(const std::string& dep_id) const;
  // Whether `w`, a deployment's replica, holds what its calls need: the
  // deployment's checkpoint among `checkpoints` (a base model's deployment:
  // that model loaded). False for a worker of no deployment.
  bool ReplicaReady(const Worker& w, const std::string& loaded_model,
                    const std::vector<std::string>& checkpoints) const;
  void StopWorker(Worker& w, const std::string& reason, int64_t grace_ms);
  bool DispatchSample(int64_t now);
  // Pool workers holding (or starting for) the organisation's sampling and loop calls.
  int SamplingWorkersOf(const std::string& org) const;
  // Whether the organisation may take one more pool worker for its calls.
  bool MayTakeWorker(const std::string& org) const;
  // The worker a call must wait for (a live holder of its affinity key not
  // busy with a job), or nullptr.
  Worker* Holder(const WorkerCall& call);
  // Waiting calls that no live worker is about to take (what new workers are
  // started for), those a worker on `claim` may take.
  size_t CallsNeedingWorker(const DeviceClaim& claim);
  // The claims of the workers a call may take: its GPU claims, or a CPU one.
  static std::vector<DeviceClaim> ClaimsOf(const WorkerCall& call);
  // Whether `w`'s device is one the call may run on (CallsNeedingWorker).
  static bool Fits(const Worker& w, const WorkerCall& call);
  // Starts a pool worker for the first waiting call that needs one and may
  // have one, on the first of its claims with room; false when none.
  bool StartWorkerForCall(int64_t now, const std::set<std::string>& blocked);
  // Asks the executor for a worker on the lowest free slot; its startup is
  // billed to `org` and `for_id` (the job or sampling call it was started for).
  // A replica's (deployment != "") is billed on the line "deployment".
  bool StartWorker(int64_t now, const std::string& org, const std::string& for_id, bool* cold,
                   const std::string& deployment = "", BillingScope scope = BillingScope::kDedicated,
                   const std::string& run = "");
  // `count` of them on the lowest free slots (the caller checked there are
  // as many), started together (Executor::StartGroup) when more than one: a
  // gang's missing workers. All or none.
  // On GPUs for a GPU `claim`: the lowest free ones of its type, no CPU slot.
  bool StartWorkers(int64_t now, size_t count, const std::string& org, const std::string& for_id, bool* cold,
                    const std::string& deployment, BillingScope scope, const std::string& run,
                    const DeviceClaim& claim);
  // Ends every call the worker holds that is not answered (it went away).
  void EndSample(Worker& w, int64_t now);
  // What calls must share to be decoded in one batch ("" = never batched:
  // a loop request other than a sample).
  static std::string BatchKey(const WorkerCall& call);
  // Whether `call` may join the batch `w` is decoding (same key, room
  // under `cap` calls, the worker busy with sampling only).
  bool CanJoin(const Worker& w, const WorkerCall& call, int64_t cap) const;
  // Gives `call` to `w` (idle, or joining its batch): state, segment, save.
  void AssignSample(Worker& w, const std::shared_ptr<WorkerCall>& call, int64_t now);
  // Takes an answered (or cancelled, undelivered) call off `w`; the
  // worker goes back to idle with its last call.
  void Release(Worker& w, const std::shared_ptr<WorkerCall>& call, int64_t now);
  // The call with this id that `w` holds (nullptr when none).
  static std::shared_ptr<WorkerCall> CallOf(const Worker& w, const std::string& id);
  // The first of w's calls not yet handed over (nullptr when none).
  static std::shared_ptr<WorkerCall> Undelivered(const Worker& w);
  // Marks the call handed over and gives the task the worker gets.
  static Json Deliver(const Worker& w, WorkerCall& call);

  // Writes the worker's record and the segments closed since the last save
  // in one transaction (Meter::Save: on failure they stay, logged, and
  // TickLocked writes them again: RetryUnsaved).
  Status SaveWorker(Worker& w) { return meter_.Save(w.rec, w.usage); }
  // Writes again every worker whose last save failed, live or exited.
  void RetryUnsaved();
  // Forgets a worker that exited; a record not yet written is kept by the
  // Meter to be written by RetryUnsaved.
  void RemoveWorker(WorkerPool::Map::iterator it);
  Result<JobRecord> SubmitLocked(JobRecord job, bool* created);
  // A submission waiting for the group commit (Submit).
  struct PendingSubmit {
    Metadata::NewJob entry;
    Task task;
    bool done = false;
  };
  // Writes every waiting submission in one transaction with mu_ released,
  // then queues the created jobs; `lock` holds mu_ before and after.
  void CommitSubmits(std::unique_lock<std::mutex>& lock);
  // Over the organisation's cap: the job of an accepted request this one
  // replays, or the org_cap error; nullopt when there is room.
  Result<std::optional<JobRecord>> OverCap(const JobRecord& job);
  // A job's first events ("Created ...", "Validated ...").
  static std::vector<EventRecord> FirstEvents(const JobRecord& job);
  // Queues a job just created, with its task's billing set.
  void QueueCreated(Task t, const JobRecord& job);
  // Takes back a task assigned to workers that have not picked it up yet:
  // its attempt ends `outcome` and the workers are idle again.
  Status TakeBack(Task& t, int64_t now, AttemptOutcome outcome);
  Result<JobRecord> CancelLocked(const std::string& org_id, const std::string& job_id);
  // Jobs of the organisation queued, running or being written now.
  int ActiveJobs(const std::string& org_id);
  // Frees a worker whose task or call ended (busy -> idle, idle segment).
  void BackToIdle(Worker& w, int64_t now, const std::string& org);
  // Drops a call from whichever waiting queue holds it.
  void Unqueue(const std::shared_ptr<WorkerCall>& call);
  // One dispatch round; false when nothing more can be done now.
  bool DispatchOne(int64_t now);
  // Where a task can go now: idle workers on one of its claims (in order of
  // preference; a gang's warm ones first), or new workers to start, or
  // nowhere yet (kNone).
  struct Placement {
    enum Kind { kNone, kIdle, kStart } kind = kNone;
    DeviceClaim claim;
    std::vector<Worker*> idle;  // kIdle: rank 0 first
    size_t start = 0;           // kStart: how many
  };
  Placement Place(const Task& t, int64_t now);
  // A GPU task Place found none for: its job's events say what it waits
  // for (once for each reason).
  void NoteWaiting(Task& t, int64_t now);
  Status Assign(Task& t, Worker& w, int64_t now) { return Assign(t, std::vector<Worker*>{&w}, now); }
  // A gang's attempt: ws[r] takes rank r.
  Status Assign(Task& t, const std::vector<Worker*>& ws, int64_t now);

  // --- one job on many workers (runtime_gangs.cpp) ---
  // The task's gang size and communication, and its devices, from its
  // job's spec; kInvalidArgument (param "workers") for more workers than
  // slots, (param "gpu") for GPUs the pool cannot give the whole gang.
  Status SetGang(Task& t, const JobRecord& j) const;
  // Marks the gang's workers still on the attempt ending now drained.
  void DrainGang(const Task& t, int64_t now);
  // A drained member asking for work: back to idle (true), else false.
  bool Undrain(Worker& w, int64_t now);
  // Lapsed leases and gone workers among ranks 1..; drained members that
  // never come back. Under the tick.
  void TickGangs(int64_t now);
  // The task's description for the worker of `rank` (docs/api.md, "Workers").
  Json TaskJson(const JobRecord& job, const Task& t, int rank) const;
  // Ends the running attempt of `t` and decides what happens to the job.
  Status EndAttempt(Task& t, int64_t now, AttemptOutcome outcome, const Json& error, bool retry,
                    bool costs_retry);
  Status FinishJob(JobRecord& job, JobStatus status, const Json& error, int64_t now);
  // A batch's completed `attempt`: the output and error files it
  // assembled registered (under the ids its spec fixed; a replay finds them
  // there), the job succeeded with `result`. runtime_batches.cpp.
  Status FinishBatch(JobRecord& job, int64_t attempt, const Json& result, int64_t now);
  void ObserveExit(const WorkerExit& e);
  // The attempt's task if the worker holds a rank in it not yet finished
  // (*rank gets it), else kFailedPrecondition (lease_lost).
  Result<Task*> RunningTask(const std::string& worker_id, const std::string& job_id, int64_t attempt,
                            int* rank = nullptr);
  void TickLocked();
  Json WorkerJson(const Worker& w) const;
  // The organisation whose work `w` holds ("" = none: idle in the pool).
  std::string WorkOrg(const Worker& w) const;
  // The model of that work as its owner named it.
  std::string WorkModelName(const Worker& w) const;

  Metadata& md_;
  Executor& exec_;
  Clock& clock_;
  RuntimeOptions opt_;

  std::mutex mu_;
  std::condition_variable cv_;  // a task was assigned, or the runtime stops
  JobQueue jobs_;               // fine-tuning jobs queued and running, the fair choice among them
  // Group commit: submissions waiting to be written, the organisations'
  // counts of them (caps count them), and whether a thread is writing a
  // batch now (with mu_ released); submit_cv_ wakes the waiters.
  std::vector<std::shared_ptr<PendingSubmit>> submits_;
  std::map<std::string, int> submitting_by_org_;
  bool committing_ = false;
  std::condition_variable submit_cv_;
  SampleQueue samples_;  // sampling and loop calls waiting for a pool worker, the fair choice among them
  int64_t serve_counter_ = 0;
  WorkerPool workers_;           // live workers, their slots, the start back-off
  DeploymentTable deployments_;  // live deployments, the calls waiting for their replicas
  WorkerTokens tokens_;          // token sha256 -> live worker (a lock of its own)
  Meter meter_;                  // usage segments; exited workers whose last record is not yet written
  int64_t last_dispatch_ns_ = 0;
  std::set<std::string> dropped_;          // DropHeld's keys,
  std::deque<std::string> dropped_order_;  // oldest first
  bool stopping_ = false;
  std::thread ticker_;
};

}  // namespace burst
