// Loops: training loops as a service, the control plane's side
// (docs/loops.md). Tinker sessions (a client process), training runs (a LoRA
// model, Tinker's model_id) and futures (one per request).
//
// Every request on a run has a seq_id; the run executes them strictly in
// seq_id order, one at a time, each as a "loop" call to a worker through the
// Runtime (affinity: the worker that holds the run in memory). Requests that
// arrive early wait for their turn; a request whose seq_id was already
// accepted is answered with the future it made (a retried POST applies
// once). The control plane keeps, per run, every state-changing request
// since the run's last snapshot, so a worker that dies is replaced by one
// that restores the snapshot and replays them: later results equal an
// undisturbed run's bit for bit. A call that fails because its worker went
// away is sent again; one that fails for its input fails its future.
//
// Durable with a journal (runtime/loop_journal.h): sessions, samplers, runs
// and each accepted request are written to the object store before the
// client hears of them, each outcome before its result is handed out, each
// restore point as it is made. Recover() reads them back in a control plane
// started after a crash: runs are rebuilt from their restore point and the
// requests after it (replayed on a worker, the same bits), requests that had
// not finished run again in seq_id order, and finished results can still be
// fetched. Without a journal (tests) all of it lives in this process only.
//
// Bounded per organisation (LoopLimits): live sessions and training runs
// (over the cap: 429 org_cap), and the bytes of request data the control
// plane holds for them: requests waiting for their turn or for a thread,
// the requests a run keeps to replay, and results not yet fetched. Requests
// are kept as CBOR, not as JSON trees. A run idle for run_idle_ms with
// nothing to replay is parked: it stops counting as live and holds nothing
// but its record (a request revives it). Requests run on a pool of threads
// shared fairly among organisations (core/fair_pool.h), never a thread each.
//
// Thread-safety: every method may be called from any thread.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "core/fair_pool.h"
#include "core/json.h"
#include "core/states.h"
#include "core/waker.h"
#include "runtime/loop_journal.h"
#include "runtime/runtime.h"

namespace burst {

// What a loop request holds of the organisation's bytes, as CBOR.
using LoopPayload = std::shared_ptr<const std::vector<uint8_t>>;

struct LoopLimits {
  int max_sessions_per_org = 64;           // live sessions (a heartbeat within a day)
  int max_runs_per_org = 32;               // live training runs (not parked)
  int max_kept_runs_per_org = 1024;        // parked runs kept listed; past it the oldest are forgotten
  int max_samplers_per_org = 1024;         // sampling sessions
  int64_t max_bytes_per_run = 32LL << 20;  // requests waiting and kept to replay
  int64_t max_bytes_per_org = 64LL << 20;  // all of the organisation's requests and unfetched results
  int64_t run_idle_ms = 3'600'000;         // no request for this long: the run is parked
  int64_t max_wait_turn_ms = 600'000;      // a request waiting this long for an earlier seq_id fails
  int threads = 256;                       // requests on workers at once, in all
  int threads_per_org = 16;                // ... and of one organisation
};

struct LoopFuture {
  std::string id;  // "req-..."
  std::string org_id;
  std::string run;   // the training run (model_id), "" for samples
  std::string type;  // create_model, forward_backward, forward, optim_step, save_weights, ...
  int64_t seq_id = 0;
  // What the worker applies ({"type", ...}), as CBOR until it has run
  // (kept by the run while it may be replayed); `meta` holds the op's small
  // fields the routes read back (path, prefix, sampling_session_seq_id).
  LoopPayload op;
  Json meta = Json::object();
  bool done = false;
  bool journaled = true;  // false while its journal record is being written (it waits to run)
  Json result;            // the worker's result (JSON; the routes render proto where the SDK wants it)
  Status error;           // failed: the message and whose fault (user: kInvalidArgument & co)
  int64_t created_ms = 0, finished_ms = 0;
  // Filled while it runs:
  std::string worker;
  bool cold = false;
  double compute_ms = 0;   // the worker's time on it (the last attempt's)
  int64_t batch_peak = 0;  // a sample: the most calls decoded together while it ran
  // Kept until done: each woken then (retrieve_future's parked long polls).
  std::vector<std::weak_ptr<Waker>> waiters;
  int64_t bytes = 0;       // what it holds of the organisation's bytes now
  int64_t fetched_ms = 0;  // when its result was first fetched (0: not yet)
};

struct LoopRunInfo {
  std::string id, org_id, session_id;
  std::string base_model;        // the folder
  std::string base_model_name;   // as the client named it
  std::string base_model_store;  // shipped to workers from here ("" = the folder)
  Json lora;                     // {rank, seed, train_attn, train_mlp, train_unembed}
  BillingScope scope = BillingScope::kDedicated;
  int64_t vocab_size = 0, max_seq_len = 0;
  int64_t created_ms = 0, last_request_ms = 0;
  // Counted as requests finish: how many, how many had to start a worker
  // (cold) or rebuild the run on one (restored), the newest restore point.
  int64_t requests = 0, cold_starts = 0, restores = 0, version = 0, replay = 0;
  bool active = true;  // false once deactivated: it takes no more requests
};

class Loops {
 public:
  // `journal` may be null (nothing kept past this process); it outlives this.
  Loops(Runtime& rt, int64_t call_wait_ms, LoopLimits limits = {}, LoopJournal* journal = nullptr);
  ~Loops();

  // Takes over what the journal holds (once, before the first request):
  // sessions, samplers, runs with their requests. Records it cannot read are
  // named on stderr and left alone. Returns how many runs it took over.
  Result<int> Recover();

  // A session for org; its id. kResourceExhausted (org_cap) past the
  // organisation's live sessions.
  Result<std::string> CreateSession(const std::string& org_id, const Json& tags, const Json& user_metadata);
  Status Heartbeat(const std::string& org_id, const std::string& session_id);
  // Ends a session (the SDK's ServiceClient.close, 0.26 and later) with
  // `reason` ("success", "errored", "interrupted"); the first reason stays.
  // Afterwards heartbeats, new runs and samplers on it are refused
  // (kFailedPrecondition naming session_id); its runs finish their queued
  // requests and idle out as any other.
  Status FinishSession(const std::string& org_id, const std::string& session_id, const std::string& reason);

  // A run: id "{session}:train:{model_seq_id}" (what the SDK derives); the
  // create_model future is answered once the run exists (no worker needed).
  Result<std::shared_ptr<LoopFuture>> CreateRun(LoopRunInfo run, int64_t model_seq_id);
  // A run made by loading a checkpoint (the SDK's create-via-load): the run
  // as CreateRun makes it, whose first request is `load` (a load_weights
  // op) at seq_id 0, so the client numbers its next request 1. A retry
  // while the load waits gets its future; once the run has gone on,
  // kAlreadyExists naming model_seq_id.
  Result<std::shared_ptr<LoopFuture>> CreateRunByLoad(LoopRunInfo run, int64_t model_seq_id, Json load);
  Result<LoopRunInfo> Run(const std::string& org_id, const std::string& run_id);
  // The same, throwing its kNotFound (for route handlers).
  LoopRunInfo RunOrThrow(const std::string& org_id, const std::string& run_id) {
    auto r = Run(org_id, run_id);
    if (!r.ok()) throw Error(r.status());
    return std::move(r).value();
  }
  std::vector<LoopRunInfo> Runs(const std::string& org_id);

  // A request on a run, in seq_id order (seq_id <= 0: the next one).
  Result<std::shared_ptr<LoopFuture>> Submit(const std::string& org_id, const std::string& run_id,
                                             int64_t seq_id, const std::string& type, Json op);
  // Ends a run (Baseten's "deactivate"): requests waiting for their turn
  // fail, the one on a worker finishes, later ones are refused naming
  // model_id; it stops counting as live and holds nothing but its record;
  // its checkpoints stay, to start new runs from. Idempotent.
  Status Deactivate(const std::string& org_id, const std::string& run_id);

  // A sampling request (no order): `op` names its checkpoint.
  Result<std::shared_ptr<LoopFuture>> Sample(const std::string& org_id, const std::string& base_model,
                                             const std::string& base_model_store, BillingScope scope,
                                             const std::string& run, Json op);

  // The organisation's live sessions, and what a session made (its runs and
  // samplers); kNotFound for an unknown session.
  std::vector<std::string> Sessions(const std::string& org_id);
  Result<std::pair<std::vector<std::string>, std::vector<std::string>>> SessionContents(
      const std::string& org_id, const std::string& session_id);

  // A sampler: a sampling session on a checkpoint prefix (or base model).
  // kResourceExhausted (org_cap) past the organisation's count.
  Result<std::string> CreateSampler(const std::string& org_id, const std::string& session_id, int64_t seq,
                                    Json sampler);
  Result<Json> Sampler(const std::string& org_id, const std::string& sampler_id);

  // A worker parked `run` at `version` (a restore point at `prefix`): when
  // that is still the run's version, the requests before it are dropped.
  Status Parked(const std::string& run, const std::string& prefix, int64_t version);

  // A download link's token for a checkpoint folder, valid until expires_ms;
  // Archive gives back {prefix, name} (kNotFound once expired or unknown).
  std::string IssueArchive(const std::string& prefix, const std::string& name, int64_t expires_ms);
  Result<std::pair<std::string, std::string>> Archive(const std::string& token);

  // Waits up to wait_ms for the future to finish; kNotFound for an unknown
  // id (or another organisation's).
  Result<std::shared_ptr<LoopFuture>> Wait(const std::string& org_id, const std::string& future_id,
                                           int64_t wait_ms);
  // The future, without waiting: `waiter` is woken once it is done (at
  // once, here, when it already is). kNotFound as Wait.
  Result<std::shared_ptr<LoopFuture>> Watch(const std::string& org_id, const std::string& future_id,
                                            const std::shared_ptr<Waker>& waiter);
  // Whether the future is done (its fields are then final).
  bool IsDone(const std::shared_ptr<LoopFuture>& f);
  // Its result was handed to the client: it is let go soon after (a retry
  // of the fetch within a minute still finds it).
  void Fetched(const std::shared_ptr<LoopFuture>& f);
  // The organisation's bytes held now (tests, /v1 views).
  int64_t BytesHeld(const std::string& org_id);
  // Before a large request is parsed: kResourceExhausted (rate_limit) when
  // the organisation's share has less than `at_least` bytes left, so a full
  // share refuses further requests without the cost of reading them.
  Status RoomFor(const std::string& org_id, int64_t at_least);

 private:
  struct RunState {
    LoopRunInfo info;
    int64_t next_seq = 1;                                   // the seq_id to execute next
    bool busy = false;                                      // a request is on a worker now
    bool parked = false;                                    // idle: not live, holds nothing but its record
    std::map<int64_t, std::shared_ptr<LoopFuture>> by_seq;  // accepted (waiting, running, done)
    int64_t version = 0;                                    // state-changing requests applied
    Json snapshot;  // {"prefix", "version"} the newest state snapshot, or null (a fresh adapter)
    std::vector<LoopPayload> replay;  // state-changing ops after the snapshot, in order
    int64_t replay_bytes = 0;
    int64_t waiting_bytes = 0;  // of its requests not yet run
    // Held while a request of this run is checked and journaled, so a
    // retried POST of its seq_id finds it written (never held with mu_ wanted).
    std::shared_ptr<std::mutex> submitting = std::make_shared<std::mutex>();
    int64_t journaled_from = 0;  // the lowest seq_id the journal may still hold
  };
  // The organisation's future with this id; kNotFound otherwise (mu_ held).
  Result<std::shared_ptr<LoopFuture>> FutureOf(const std::string& org_id, const std::string& future_id);
  // The run's info with its live version and requests kept.
  static LoopRunInfo InfoOf(const RunState& run);
  // Checks a request of the run and keeps it as `f` (not started); a
  // retried seq_id gives the future it made instead. mu_ held.
  Result<std::shared_ptr<LoopFuture>> Accept(const std::string& org_id, const std::string& run_id,
                                             int64_t seq_id, const std::string& type, LoopPayload payload,
                                             Json meta, const std::shared_ptr<LoopFuture>& f);
  // Starts the run's next request if it is its turn; mu_ held.
  void Pump(RunState& run);
  // Runs one request on a worker (on a thread of exec_, as its
  // organisation), retrying when the worker went away.
  void Execute(const std::string& run_id, const std::shared_ptr<LoopFuture>& f);
  // `proto` is let go before the future completes (it holds the request).
  void ExecuteSample(const std::shared_ptr<LoopFuture>& f, std::shared_ptr<WorkerCall> proto);
  // Journals a request's outcome and the restore point it made, if any.
  void JournalOutcome(const std::string& run_id, const LoopFuture& f, const Json& result,
                      const Status& error);
  // Marks f done with its answer, counts its result's bytes, wakes its waiters (mu_ held).
  void Complete(const std::shared_ptr<LoopFuture>& f, Json result, const Status& error);
  // Keeps a new future; forgets results kept past their time, requests a
  // run ran long ago, sessions long idle; parks idle runs (mu_ held).
  void Remember(const std::shared_ptr<LoopFuture>& f);
  void Sweep(int64_t now);
  // kResourceExhausted (org_cap) when the organisation has as many live
  // runs as it may; mu_ held.
  Status RoomForRun(const std::string& org_id);
  // Takes `bytes` of the organisation's share for a request of `run` (null:
  // a sample): kInvalidArgument past the run's share, kResourceExhausted
  // (rate_limit) past the organisation's. mu_ held.
  Status Hold(const std::string& org_id, RunState* run, int64_t bytes);
  void Release(const std::string& org_id, int64_t bytes);
  // Drops the run's replayed requests (a restore point covers them); mu_ held.
  void ClearReplay(RunState& run);
  // Forgets a done future's result and payload (mu_ held).
  void Forget(LoopFuture& f);

  // Journal writes, outside mu_ (nullptr: no journal). A failed write is
  // logged; the functions that must not go on without it return it.
  Status Journal(const std::function<Status(LoopJournal&)>& write, const std::string& what);

  Runtime& rt_;
  LoopJournal* journal_;
  int64_t call_wait_ms_;
  const LoopLimits limits_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::map<std::string, std::pair<std::string, int64_t>> sessions_;  // id -> (org, last heartbeat ms)
  std::map<std::string, std::string> finished_;  // a finished session's id -> its reason (while it is kept)
  std::map<std::string, RunState> runs_;
  std::map<std::string, Json> samplers_;  // id -> {org, base_model, checkpoint_prefix, ...}
  std::map<std::string, std::shared_ptr<LoopFuture>> futures_;
  struct ArchiveLink {
    std::string prefix, name;
    int64_t expires_ms = 0;
  };
  std::map<std::string, ArchiveLink> archives_;  // sha256 of the token -> link (the token is not kept)
  friend struct LoopsArchiveProbe;               // loops_test reads archives_
  std::map<std::string, int64_t> org_bytes_;     // bytes each organisation's loops hold
  bool stopping_ = false;
  int64_t last_sweep_ms_ = 0;
  // Last: its threads finish before the state they use goes.
  FairPool exec_;
};

}  // namespace burst
