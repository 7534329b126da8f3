#include "runtime/loops.h"

#include <algorithm>
#include <chrono>

#include "core/ids.h"
#include "runtime/loops_internal.h"
#include "store/keys.h"
#include "train/loop_data.h"

namespace burst {

namespace {

// A run's id: its session's, and the client's number for it there.
std::string RunIdOf(const std::string& session_id, int64_t model_seq_id) {
  return session_id + "-train-" + std::to_string(model_seq_id);
}

// How often a request whose worker went away is sent again before its
// future fails (each attempt restores the run on another worker).
constexpr int kMaxWorkerLosses = 3;
// Requests of one run that may wait for their turn (arrived before an
// earlier seq_id): more is a client that skipped a number.
constexpr size_t kMaxWaitingPerRun = 256;

// A finished request's result is kept this long for retrieve_future (the
// SDK polls at once; a client that went away does not hold memory forever).
constexpr int64_t kKeepResultMs = 30 * 60 * 1000;
// A session without a heartbeat for this long is forgotten (its runs stay).
constexpr int64_t kSessionIdleMs = 24LL * 3600 * 1000;
// A result fetched once is kept this much longer for a fetch retried.
constexpr int64_t kKeepFetchedMs = 60'000;
// A request's small fields the routes read back after it ran.
constexpr const char* kMetaFields[] = {"path", "prefix", "name", "kind", "sampling_session_seq_id"};

LoopPayload Pack(const Json& op) { return std::make_shared<const std::vector<uint8_t>>(Json::to_cbor(op)); }

// Roughly what a JSON value costs in memory (a result kept for its fetch).
int64_t JsonBytes(const Json& j) {
  switch (j.type()) {
    case Json::value_t::object: {
      int64_t n = 64;
      for (auto it = j.begin(); it != j.end(); ++it)
        n += 48 + static_cast<int64_t>(it.key().size()) + JsonBytes(*it);
      return n;
    }
    case Json::value_t::array: {
      int64_t n = 32;
      for (const Json& v : j) n += JsonBytes(v);
      return n;
    }
    case Json::value_t::string:
      return 32 + static_cast<int64_t>(j.get_ref<const std::string&>().size());
    default:
      return 16;
  }
}

std::string MiB(int64_t bytes) { return std::to_string((bytes + (1 << 20) - 1) >> 20) + " MiB"; }

bool WorkerWentAway(const Status& s) { return s.code() == Code::kUnavailable; }
// The worker did not hold the run at the request's version and got no recipe (worker/loops.h).
bool NeedsRestore(const Status& s) { return s.code() == Code::kFailedPrecondition && s.param() == "restore"; }
bool NoCapacity(const Status& s) { return s.code() == Code::kResourceExhausted && s.reason() == "capacity"; }

}  // namespace

Loops::Loops(Runtime& rt, int64_t call_wait_ms, LoopLimits limits, LoopJournal* journal)
    : rt_(rt),
      journal_(journal),
      call_wait_ms_(call_wait_ms),
      limits_(limits),
      exec_(limits.threads, limits.threads_per_org) {}

Loops::~Loops() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  exec_.Shutdown();  // the requests still queued see stopping_ and end at once
}

void Loops::Remember(const std::shared_ptr<LoopFuture>& f) {
  const int64_t now = rt_.clock().NowMs();
  if (now - last_sweep_ms_ > 60'000) {  // at most once a minute
    last_sweep_ms_ = now;
    Sweep(now);
  }
  futures_[f->id] = f;
}

void Loops::Forget(LoopFuture& f) {
  Release(f.org_id, f.bytes);
  f.bytes = 0;
  f.result = Json();
}

void Loops::Sweep(int64_t now) {
  auto expired = [&](const LoopFuture& f) {
    return f.done &&
           (now - f.finished_ms > kKeepResultMs || (f.fetched_ms > 0 && now - f.fetched_ms > kKeepFetchedMs));
  };
  for (auto it = futures_.begin(); it != futures_.end();) {
    if (!expired(*it->second)) {
      ++it;
      continue;
    }
    Forget(*it->second);
    it = futures_.erase(it);
  }
  std::map<std::string, std::vector<std::pair<int64_t, std::string>>> parked_by_org;
  for (auto& [id, run] : runs_) {  // the requests a run already ran, past their keeping time
    for (auto it = run.by_seq.begin(); it != run.by_seq.end() && it->first < run.next_seq;) {
      it = expired(*it->second) ? run.by_seq.erase(it) : std::next(it);
    }
    // Requests still waiting for an earlier seq_id that never came: failed,
    // and what they held let go.
    for (auto it = run.by_seq.lower_bound(run.next_seq); it != run.by_seq.end();) {
      LoopFuture& f = *it->second;
      if (now - f.created_ms <= limits_.max_wait_turn_ms) {
        ++it;
        continue;
      }
      const int64_t bytes = PayloadBytes(f.op);
      run.waiting_bytes -= bytes;
      Release(f.org_id, bytes);
      f.bytes = 0;
      f.op.reset();
      Complete(it->second, Json(),
               Status(Code::kFailedPrecondition,
                      "seq_id " + std::to_string(f.seq_id) + " waited " +
                          std::to_string(limits_.max_wait_turn_ms / 1000) + " s for seq_id " +
                          std::to_string(run.next_seq) + " of " + id + ", which never came",
                      "seq_id"));
      it = run.by_seq.erase(it);
    }
    // Idle with nothing to replay: parked (a request revives it).
    if (!run.parked && !run.busy && run.replay.empty() &&
        run.next_seq > (run.by_seq.empty() ? 0 : run.by_seq.rbegin()->first) &&
        now - run.info.last_request_ms > limits_.run_idle_ms) {
      run.parked = true;
      run.by_seq.clear();
    }
    if (run.parked) parked_by_org[run.info.org_id].emplace_back(run.info.last_request_ms, id);
  }
  for (auto& entry : parked_by_org) {  // the oldest parked runs past the org's count are forgotten
    const std::string& org = entry.first;
    auto& parked = entry.second;
    if (static_cast<int>(parked.size()) <= limits_.max_kept_runs_per_org) continue;
    std::sort(parked.begin(), parked.end());
    for (size_t i = 0; i + limits_.max_kept_runs_per_org < parked.size(); ++i) {
      // Rare (a run idle past the kept count): its journal goes under the lock.
      const std::string& forgotten = parked[i].second;
      Journal([&](LoopJournal& j) { return j.DeleteRun(org, forgotten); }, "forgetting a run")
          .IgnoreError("logged; a restarted control plane lists the run again and forgets it again");
      runs_.erase(forgotten);
    }
  }
  for (auto it = sessions_.begin(); it != sessions_.end();) {
    if (now - it->second.second <= kSessionIdleMs) {
      ++it;
      continue;
    }
    const std::string prefix = it->first + "-sample-";  // its sampling sessions go with it
    const std::string org = it->second.first;
    for (auto s = samplers_.lower_bound(prefix); s != samplers_.end() && s->first.rfind(prefix, 0) == 0;) {
      Journal([&](LoopJournal& j) { return j.DeleteSampler(org, s->first); }, "forgetting a sampler")
          .IgnoreError("logged; a restarted control plane forgets it again");
      s = samplers_.erase(s);
    }
    // Rare (a day without a heartbeat): its journal record goes under the lock.
    Journal([&](LoopJournal& j) { return j.DeleteSession(org, it->first); }, "forgetting a session")
        .IgnoreError("logged; a restarted control plane forgets it again a day later");
    finished_.erase(it->first);
    it = sessions_.erase(it);
  }
}

Status Loops::RoomForRun(const std::string& org_id) {
  auto live_runs = [&] {
    int live = 0;
    for (const auto& [id, r] : runs_) live += r.info.org_id == org_id && !r.parked;
    return live;
  };
  int live = live_runs();
  if (live >= limits_.max_runs_per_org) {
    Sweep(rt_.clock().NowMs());  // idle runs are parked first
    live = live_runs();
  }
  if (live < limits_.max_runs_per_org) return Status();
  return Status(Code::kResourceExhausted,
                "your organisation has " + std::to_string(live) + " live training runs, its limit (" +
                    std::to_string(limits_.max_runs_per_org) + "); a run idle for " +
                    std::to_string(limits_.run_idle_ms / 60'000) + " minutes stops counting",
                "max_loop_runs", "org_cap");
}

Status Loops::Hold(const std::string& org_id, RunState* run, int64_t bytes) {
  if (run && run->waiting_bytes + run->replay_bytes + bytes > limits_.max_bytes_per_run) {
    return Status(Code::kInvalidArgument,
                  "this request's data (" + MiB(bytes) + ") would take what " + run->info.id +
                      " holds past its limit of " + MiB(limits_.max_bytes_per_run) + ": " +
                      MiB(run->waiting_bytes) + " of requests waiting for their turn and " +
                      MiB(run->replay_bytes) +
                      " of forward_backward data since its last optim_step or save_state; "
                      "call optim_step, or wait for earlier requests to finish",
                  "data");
  }
  if (org_bytes_[org_id] + bytes > limits_.max_bytes_per_org)
    Sweep(rt_.clock().NowMs());  // results fetched go first
  int64_t& total = org_bytes_[org_id];
  if (total + bytes > limits_.max_bytes_per_org) {
    const int64_t had = total;
    if (total == 0) org_bytes_.erase(org_id);
    return Status(Code::kResourceExhausted,
                  "your organisation's training loops hold " + MiB(had) +
                      " of requests and unfetched results; this one (" + MiB(bytes) +
                      ") would take them past the limit of " + MiB(limits_.max_bytes_per_org) +
                      "; retry when earlier requests have finished",
                  "data", "rate_limit");
  }
  total += bytes;
  return Status();
}

void Loops::Release(const std::string& org_id, int64_t bytes) {
  if (bytes == 0) return;
  auto it = org_bytes_.find(org_id);
  if (it != org_bytes_.end() && (it->second -= bytes) <= 0) org_bytes_.erase(it);
}

void Loops::ClearReplay(RunState& run) {
  Release(run.info.org_id, run.replay_bytes);
  run.replay.clear();
  run.replay_bytes = 0;
}

Status Loops::RoomFor(const std::string& org_id, int64_t at_least) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = org_bytes_.find(org_id);
  const int64_t held = it == org_bytes_.end() ? 0 : it->second;
  if (held + at_least <= limits_.max_bytes_per_org) return Status();
  return Status(Code::kResourceExhausted,
                "your organisation's training loops hold " + MiB(held) +
                    " of requests and unfetched results, its "
                    "limit being " +
                    MiB(limits_.max_bytes_per_org) + "; retry when earlier requests have finished",
                "data", "rate_limit");
}

int64_t Loops::BytesHeld(const std::string& org_id) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = org_bytes_.find(org_id);
  return it == org_bytes_.end() ? 0 : it->second;
}

Result<std::shared_ptr<LoopFuture>> Loops::CreateRun(LoopRunInfo run, int64_t model_seq_id) {
  std::unique_lock<std::mutex> lock(mu_);
  auto s = sessions_.find(run.session_id);
  if (s == sessions_.end() || s->second.first != run.org_id) {
    return Status(Code::kNotFound, "no session " + run.session_id + " (create_session first)", "session_id");
  }
  if (finished_.count(run.session_id)) {
    return Status(Code::kFailedPrecondition,
                  "session " + run.session_id + " was finished; start a new session", "session_id");
  }
  if (model_seq_id < 0) return Status(Code::kInvalidArgument, "model_seq_id must be >= 0", "model_seq_id");
  run.id = RunIdOf(run.session_id, model_seq_id);
  const int64_t now = rt_.clock().NowMs();
  auto f = std::make_shared<LoopFuture>();
  f->org_id = run.org_id;
  f->run = run.id;
  f->type = "create_model";
  f->created_ms = f->finished_ms = now;
  f->done = true;
  f->result = {{"model_id", run.id}, {"type", "create_model"}};
  auto existing = runs_.find(run.id);
  if (existing != runs_.end()) {
    // A retried create_model: the same run, answered again.
    if (existing->second.info.base_model != run.base_model || existing->second.info.lora != run.lora) {
      return Status(Code::kAlreadyExists,
                    "model_seq_id " + std::to_string(model_seq_id) + " of session " + run.session_id +
                        " already made " + run.id + " with another base model or lora_config",
                    "model_seq_id");
    }
  } else {
    if (Status room = RoomForRun(run.org_id); !room.ok()) return room;
    run.created_ms = run.last_request_ms = now;
    runs_[run.id].info = run;
    lock.unlock();
    if (Status s = Journal([&](LoopJournal& j) { return j.PutRun(run); }, "run " + run.id); !s.ok()) {
      lock.lock();
      runs_.erase(run.id);  // a failed request creates nothing
      return s;
    }
    lock.lock();
  }
  f->id = NewId("req");
  Remember(f);
  return f;
}

Result<std::shared_ptr<LoopFuture>> Loops::CreateRunByLoad(LoopRunInfo run, int64_t model_seq_id, Json load) {
  const std::string org_id = run.org_id;
  const std::string id = RunIdOf(run.session_id, model_seq_id);
  bool fresh = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    fresh = runs_.find(id) == runs_.end();
  }
  auto created = CreateRun(std::move(run), model_seq_id);
  if (!created.ok()) return created.status();
  {
    std::lock_guard<std::mutex> lock(mu_);
    RunState& r = runs_.at(id);
    if (auto waiting = r.by_seq.find(0); waiting != r.by_seq.end()) return waiting->second;
    if (r.next_seq > 1 || !r.by_seq.empty() || r.version > 0) {
      return Status(Code::kAlreadyExists,
                    "model_seq_id " + std::to_string(model_seq_id) + " already made " + id +
                        ", which has run requests since; load into it with its model_id",
                    "model_seq_id");
    }
    r.next_seq = 0;  // the load is request 0
  }
  auto submitted = Submit(org_id, id, 0, "load_weights", std::move(load));
  if (!submitted.ok() && fresh) {
    // A failed request creates nothing: the run this load was to make goes.
    std::lock_guard<std::mutex> lock(mu_);
    if (auto r = runs_.find(id); r != runs_.end() && r->second.by_seq.empty() && r->second.version == 0)
      runs_.erase(r);
  }
  return submitted;
}

Result<LoopRunInfo> Loops::Run(const std::string& org_id, const std::string& run_id) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = runs_.find(run_id);
  if (it == runs_.end() || it->second.info.org_id != org_id) {
    return Status(Code::kNotFound, "no training run " + run_id, "model_id");
  }
  return InfoOf(it->second);
}

LoopRunInfo Loops::InfoOf(const RunState& r) {
  LoopRunInfo info = r.info;
  info.version = r.version;
  info.replay = static_cast<int64_t>(r.replay.size());
  return info;
}

std::vector<LoopRunInfo> Loops::Runs(const std::string& org_id) {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<LoopRunInfo> out;
  for (const auto& [id, r] : runs_) {
    if (r.info.org_id == org_id) out.push_back(InfoOf(r));
  }
  return out;
}

Result<std::shared_ptr<LoopFuture>> Loops::Submit(const std::string& org_id, const std::string& run_id,
                                                  int64_t seq_id, const std::string& type, Json op) {
  op["type"] = type;
  LoopPayload payload = Pack(op);  // before the lock: it can be MiBs
  Json meta = Json::object();
  for (const char* k : kMetaFields)
    if (op.contains(k)) meta[k] = op[k];
  op = Json();
  std::shared_ptr<std::mutex> submitting;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = runs_.find(run_id);
    if (it == runs_.end() || it->second.info.org_id != org_id) {
      return Status(Code::kNotFound, "no training run " + run_id + " (create_model first)", "model_id");
    }
    submitting = it->second.submitting;
  }
  // One request of the run at a time from here until it is journaled.
  std::lock_guard<std::mutex> turn(*submitting);
  auto f = std::make_shared<LoopFuture>();
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto found = Accept(org_id, run_id, seq_id, type, std::move(payload), std::move(meta), f);
    if (!found.ok() || found.value() != f) return found;
    if (!journal_) {
      Pump(runs_.at(run_id));
      return f;
    }
  }
  JournalRequest record;
  record.id = f->id;
  record.type = type;
  record.seq_id = f->seq_id;
  record.created_ms = f->created_ms;
  record.meta = f->meta;
  record.op = f->op;
  Status written =
      Journal([&](LoopJournal& j) { return j.PutRequest(org_id, run_id, record); }, "request " + f->id);
  std::lock_guard<std::mutex> lock(mu_);
  auto it = runs_.find(run_id);
  if (it == runs_.end()) return Status(Code::kNotFound, "no training run " + run_id, "model_id");
  RunState& run = it->second;
  if (!written.ok()) {  // a failed request creates nothing
    const int64_t bytes = PayloadBytes(f->op);
    run.waiting_bytes -= bytes;
    Release(org_id, bytes);
    run.by_seq.erase(f->seq_id);
    futures_.erase(f->id);
    return written;
  }
  f->journaled = true;
  Pump(run);
  return f;
}

Result<std::shared_ptr<LoopFuture>> Loops::Accept(const std::string& org_id, const std::string& run_id,
                                                  int64_t seq_id, const std::string& type,
                                                  LoopPayload payload, Json meta,
                                                  const std::shared_ptr<LoopFuture>& f) {
  auto it = runs_.find(run_id);
  if (it == runs_.end() || it->second.info.org_id != org_id) {
    return Status(Code::kNotFound, "no training run " + run_id + " (create_model first)", "model_id");
  }
  RunState& run = it->second;
  if (!run.info.active) {
    // 400, not 409: the SDK retries a 409 for minutes.
    return Status(Code::kInvalidArgument,
                  "training run " + run_id +
                      " was deactivated; start a new run from one of its checkpoints "
                      "(create_training_client_from_state)",
                  "model_id");
  }
  if (seq_id <= 0)
    seq_id = run.by_seq.empty() ? run.next_seq : std::max(run.next_seq, run.by_seq.rbegin()->first + 1);
  if (auto seen = run.by_seq.find(seq_id); seen != run.by_seq.end()) {
    // A retried POST: the request it made, applied once.
    if (seen->second->type != type) {
      return Status(
          Code::kAlreadyExists,
          "seq_id " + std::to_string(seq_id) + " of " + run_id + " was already a " + seen->second->type,
          "seq_id");
    }
    return seen->second;
  }
  if (seq_id < run.next_seq) {
    return Status(
        Code::kInvalidArgument,
        "seq_id " + std::to_string(seq_id) + " of " + run_id + " is older than the requests it already ran",
        "seq_id");
  }
  size_t waiting = 0;
  for (auto w = run.by_seq.lower_bound(run.next_seq); w != run.by_seq.end(); ++w) ++waiting;
  if (waiting >= kMaxWaitingPerRun) {
    return Status(Code::kResourceExhausted,
                  std::to_string(waiting) + " requests of " + run_id + " already wait for seq_id " +
                      std::to_string(run.next_seq),
                  "seq_id", "rate_limit");
  }
  if (run.parked) {  // idle until now: live again, if there is room
    if (Status room = RoomForRun(org_id); !room.ok()) return room;
  }
  const int64_t bytes = PayloadBytes(payload);
  if (Status held = Hold(org_id, &run, bytes); !held.ok()) return held;
  run.parked = false;
  f->id = NewId("req");
  f->org_id = org_id;
  f->run = run_id;
  f->type = type;
  f->seq_id = seq_id;
  f->op = std::move(payload);
  f->meta = std::move(meta);
  f->bytes = bytes;
  f->journaled = journal_ == nullptr;
  run.waiting_bytes += bytes;
  f->created_ms = rt_.clock().NowMs();
  run.by_seq[seq_id] = f;
  run.info.last_request_ms = f->created_ms;
  Remember(f);
  return f;
}

void Loops::Pump(RunState& run) {
  if (run.busy || stopping_) return;
  auto next = run.by_seq.find(run.next_seq);
  if (next == run.by_seq.end() || !next->second->journaled) return;
  run.busy = true;
  ++run.next_seq;
  std::shared_ptr<LoopFuture> f = next->second;
  exec_.Submit(run.info.org_id, [this, id = run.info.id, f] { Execute(id, f); });
}

void Loops::Execute(const std::string& run_id, const std::shared_ptr<LoopFuture>& f) {
  Status last;
  Json result;
  bool with_restore = false;  // the recipe even to a worker that reports holding the run
  // The op and the restore recipe as JSON only while this request is on a worker.
  const Json op = Json::from_cbor(*f->op);
  for (int losses = 0, resent = 0;;) {
    auto call = std::make_shared<WorkerCall>();
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (stopping_) {
        last = Status(Code::kUnavailable, "the control plane is shutting down", "");
        break;
      }
      RunState& r = runs_.at(run_id);
      const LoopRunInfo& info = r.info;
      call->id = f->id + "-" + std::to_string(losses + resent);  // each attempt its own id
      call->org_id = info.org_id;
      call->base_model = info.base_model;
      call->model_name = info.base_model_name;
      call->loop.emplace();
      call->loop->affinity = run_id;
      call->scope = info.scope;
      call->run = run_id;
      call->task = {{"run", run_id},
                    {"op", op},
                    {"version", r.version},
                    // The requests kept to replay grow large: the worker
                    // writes a restore point at its next chance.
                    {"snapshot_soon", r.replay_bytes >= limits_.max_bytes_per_run / 4},
                    {"lora", info.lora},
                    {"base_model_name", info.base_model_name},
                    {"store_prefix", LoopPrefix(info.org_id, run_id)}};
      // A worker holding the run at this version needs no recipe (runtime.h).
      Json replay = Json::array();
      for (const LoopPayload& p : r.replay) replay.push_back(Json::from_cbor(*p));
      Json restore = {{"snapshot", r.snapshot}, {"replay", std::move(replay)}};
      if (with_restore)
        call->task["restore"] = std::move(restore);
      else
        call->loop->restore = std::move(restore);
      if (!info.base_model_store.empty()) call->task["model_store"] = info.base_model_store;
      f->worker.clear();
    }
    call = rt_.Sample(call, call_wait_ms_);
    {
      std::lock_guard<std::mutex> lock(mu_);
      f->worker = call->worker;
      f->cold = f->cold || call->cold;
    }
    if (call->error.ok()) {
      result = call->result;
      last = Status();
      break;
    }
    last = call->error;
    if (WorkerWentAway(last) && ++losses < kMaxWorkerLosses) continue;  // restored on another worker
    if (NeedsRestore(last) && ++resent <= 1) {  // it held the run at another version: again, with the recipe
      with_restore = true;
      continue;
    }
    if (NoCapacity(last)) {
      std::unique_lock<std::mutex> lock(mu_);
      if (cv_.wait_for(lock, std::chrono::seconds(1), [this] { return stopping_; })) break;
      continue;  // the pool is full: wait for a slot, as the queue would
    }
    break;
  }
  if (journal_) JournalOutcome(run_id, *f, result, last);
  std::lock_guard<std::mutex> lock(mu_);
  RunState& r = runs_.at(run_id);
  const int64_t op_bytes = PayloadBytes(f->op);
  r.waiting_bytes -= op_bytes;
  if (last.ok() && LoopOpChangesState(f->type)) {
    ++r.version;
  }
  if (last.ok() && LoopOpChangesState(f->type) && r.info.active) {
    r.replay.push_back(f->op);  // its bytes stay held, by the run now
    r.replay_bytes += op_bytes;
  } else {
    Release(f->org_id, op_bytes);
  }
  f->bytes = 0;
  f->op.reset();
  if (last.ok() && result.contains("snapshot") && result["snapshot"].is_object() &&
      result["snapshot"].value("version", int64_t{-1}) == r.version) {
    // A restore point at the current state: the ops before it are no longer needed.
    r.snapshot = result["snapshot"];
    ClearReplay(r);
  }
  if (result.is_object()) f->compute_ms = result.value("compute_ms", 0.0);  // null when it failed
  ++r.info.requests;
  r.info.cold_starts += f->cold;
  r.info.restores += last.ok() && result.contains("restored");
  Complete(f, last.ok() ? result.value("result", Json::object()) : Json(), last);
  r.busy = false;
  Pump(r);
}

void Loops::Complete(const std::shared_ptr<LoopFuture>& f, Json result, const Status& error) {
  // Kept for its fetch even past the organisation's share: it is already
  // computed, and the next request waits until it has been fetched.
  f->bytes = JsonBytes(result);
  org_bytes_[f->org_id] += f->bytes;
  f->done = true;
  f->result = std::move(result);
  f->error = error;
  f->finished_ms = rt_.clock().NowMs();
  for (const auto& weak : f->waiters) {
    if (auto w = weak.lock()) w->Wake();
  }
  f->waiters.clear();
  cv_.notify_all();
}

Result<std::shared_ptr<LoopFuture>> Loops::Sample(const std::string& org_id, const std::string& base_model,
                                                  const std::string& base_model_store, BillingScope scope,
                                                  const std::string& run, Json op) {
  op["type"] = "sample";
  auto f = std::make_shared<LoopFuture>();
  auto call = std::make_shared<WorkerCall>();
  call->org_id = org_id;
  call->base_model = base_model;
  call->loop.emplace();
  call->scope = scope;
  call->run = run;
  call->task = {{"op", op}, {"store_prefix", run.empty() ? "" : LoopPrefix(org_id, run)}};
  if (!base_model_store.empty()) call->task["model_store"] = base_model_store;
  // Counted at its JSON's size while it waits (its prompt, its settings).
  const int64_t bytes = JsonBytes(call->task);
  op = Json();
  std::lock_guard<std::mutex> lock(mu_);
  if (stopping_) return Status(Code::kUnavailable, "the control plane is shutting down", "");
  if (Status held = Hold(org_id, nullptr, bytes); !held.ok()) return held;
  f->id = NewId("req");
  f->org_id = org_id;
  f->run = run;
  f->type = "sample";
  f->bytes = bytes;
  f->created_ms = rt_.clock().NowMs();
  Remember(f);
  exec_.Submit(org_id, [this, f, call] { ExecuteSample(f, call); });
  return f;
}

void Loops::ExecuteSample(const std::shared_ptr<LoopFuture>& f, std::shared_ptr<WorkerCall> proto) {
  Status last;
  Json result;
  for (int losses = 0;;) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (stopping_) {
        last = Status(Code::kUnavailable, "the control plane is shutting down", "");
        break;
      }
    }
    auto call = std::make_shared<WorkerCall>(*proto);
    call->id = f->id + "-" + std::to_string(losses);
    call = rt_.Sample(call, call_wait_ms_);
    if (call->error.ok()) {
      result = call->result.value("result", Json::object());
      std::lock_guard<std::mutex> lock(mu_);
      f->compute_ms = call->result.value("compute_ms", 0.0);
      f->batch_peak = call->result.value("batch_peak", int64_t{0});
      f->worker = call->worker;
      f->cold = call->cold;
      last = Status();
      break;
    }
    last = call->error;
    if (WorkerWentAway(last) && ++losses < kMaxWorkerLosses) continue;
    if (NoCapacity(last)) {  // a full pool: the sample waits its turn, as a training request does
      std::unique_lock<std::mutex> lock(mu_);
      if (cv_.wait_for(lock, std::chrono::milliseconds(200), [this] { return stopping_; })) break;
      continue;
    }
    break;
  }
  proto.reset();
  std::lock_guard<std::mutex> lock(mu_);
  Release(f->org_id, f->bytes);
  Complete(f, std::move(result), last);
}

Result<std::shared_ptr<LoopFuture>> Loops::FutureOf(const std::string& org_id, const std::string& future_id) {
  auto it = futures_.find(future_id);
  if (it == futures_.end() || it->second->org_id != org_id) {
    return Status(Code::kNotFound,
                  "no request " + future_id + " (results are kept 30 minutes after they are ready)",
                  "request_id");
  }
  return it->second;
}

Result<std::shared_ptr<LoopFuture>> Loops::Wait(const std::string& org_id, const std::string& future_id,
                                                int64_t wait_ms) {
  std::unique_lock<std::mutex> lock(mu_);
  auto found = FutureOf(org_id, future_id);
  if (!found.ok()) return found.status();
  std::shared_ptr<LoopFuture> f = found.value();
  cv_.wait_for(lock, std::chrono::milliseconds(wait_ms), [&] { return f->done || stopping_; });
  return f;
}

Result<std::shared_ptr<LoopFuture>> Loops::Watch(const std::string& org_id, const std::string& future_id,
                                                 const std::shared_ptr<Waker>& waiter) {
  std::unique_lock<std::mutex> lock(mu_);
  auto found = FutureOf(org_id, future_id);
  if (!found.ok()) return found.status();
  std::shared_ptr<LoopFuture> f = found.value();
  if (f->done || stopping_) {
    lock.unlock();
    waiter->Wake();
    return f;
  }
  // Waiters of earlier polls that were answered (timed out) go first.
  auto gone = [](const std::weak_ptr<Waker>& w) { return w.expired(); };
  f->waiters.erase(std::remove_if(f->waiters.begin(), f->waiters.end(), gone), f->waiters.end());
  f->waiters.push_back(waiter);
  return f;
}

bool Loops::IsDone(const std::shared_ptr<LoopFuture>& f) {
  std::lock_guard<std::mutex> lock(mu_);
  return f->done;
}

void Loops::Fetched(const std::shared_ptr<LoopFuture>& f) {
  std::lock_guard<std::mutex> lock(mu_);
  if (f->done && f->fetched_ms == 0) f->fetched_ms = rt_.clock().NowMs();
}

}  // namespace burst
