#include "api/loops.h"

#include <chrono>

#include "core/fs.h"
#include "core/ids.h"
#include "store/keys.h"
#include "train/loop_data.h"

namespace burst {

namespace {

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

bool WorkerWentAway(const Status& s) { return s.code() == Code::kUnavailable; }
// The worker did not hold the run at the request's version and got no recipe (worker/loops.h).
bool NeedsRestore(const Status& s) { return s.code() == Code::kFailedPrecondition && s.param() == "restore"; }
bool NoCapacity(const Status& s) { return s.code() == Code::kResourceExhausted && s.reason() == "capacity"; }

}  // namespace

Loops::Loops(Runtime& rt, int64_t call_wait_ms) : rt_(rt), call_wait_ms_(call_wait_ms) {}

Loops::~Loops() {
  std::map<std::thread::id, std::thread> threads;
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
    threads.swap(threads_);
  }
  cv_.notify_all();
  for (auto& [id, t] : threads) t.join();
}

void Loops::Remember(const std::shared_ptr<LoopFuture>& f) {
  const int64_t now = rt_.clock().NowMs();
  if (now - last_sweep_ms_ > 60'000) {  // at most once a minute
    last_sweep_ms_ = now;
    for (auto it = futures_.begin(); it != futures_.end();) {
      const bool old = it->second->done && now - it->second->finished_ms > kKeepResultMs;
      it = old ? futures_.erase(it) : std::next(it);
    }
    for (auto& [id, run] : runs_) {  // the requests a run already ran, past their keeping time
      for (auto it = run.by_seq.begin(); it != run.by_seq.end() && it->first < run.next_seq;) {
        const bool old = it->second->done && now - it->second->finished_ms > kKeepResultMs;
        it = old ? run.by_seq.erase(it) : std::next(it);
      }
    }
    for (auto it = sessions_.begin(); it != sessions_.end();) {
      it = now - it->second.second > kSessionIdleMs ? sessions_.erase(it) : std::next(it);
    }
  }
  futures_[f->id] = f;
}

void Loops::Spawn(std::function<void()> fn) {
  // Threads of finished requests are joined here, so they do not pile up.
  for (const std::thread::id& id : finished_) {
    auto t = threads_.find(id);
    if (t != threads_.end()) {
      t->second.join();
      threads_.erase(t);
    }
  }
  finished_.clear();
  std::thread t([this, fn = std::move(fn)] {
    fn();
    std::lock_guard<std::mutex> lock(mu_);
    finished_.push_back(std::this_thread::get_id());
  });
  const std::thread::id id = t.get_id();
  threads_.emplace(id, std::move(t));
}

std::string Loops::CreateSession(const std::string& org_id, const Json&, const Json&) {
  std::lock_guard<std::mutex> lock(mu_);
  const std::string id = NewId("sess");
  sessions_[id] = {org_id, rt_.clock().NowMs()};
  return id;
}

Status Loops::Heartbeat(const std::string& org_id, const std::string& session_id) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = sessions_.find(session_id);
  if (it == sessions_.end() || it->second.first != org_id) {
    return Status(Code::kNotFound, "no session " + session_id, "session_id");
  }
  it->second.second = rt_.clock().NowMs();
  return Status();
}

Result<std::shared_ptr<LoopFuture>> Loops::CreateRun(LoopRunInfo run, int64_t model_seq_id) {
  std::lock_guard<std::mutex> lock(mu_);
  auto s = sessions_.find(run.session_id);
  if (s == sessions_.end() || s->second.first != run.org_id) {
    return Status(Code::kNotFound, "no session " + run.session_id + " (create_session first)", "session_id");
  }
  if (model_seq_id < 0) return Status(Code::kInvalidArgument, "model_seq_id must be >= 0", "model_seq_id");
  run.id = run.session_id + "-train-" + std::to_string(model_seq_id);
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
    run.created_ms = run.last_request_ms = now;
    runs_[run.id].info = run;
  }
  f->id = NewId("req");
  Remember(f);
  return f;
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

Result<std::shared_ptr<LoopFuture>> Loops::Submit(const std::string& org_id, const std::string& run_id, int64_t seq_id,
                                                  const std::string& type, Json op) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = runs_.find(run_id);
  if (it == runs_.end() || it->second.info.org_id != org_id) {
    return Status(Code::kNotFound, "no training run " + run_id + " (create_model first)", "model_id");
  }
  RunState& run = it->second;
  if (seq_id <= 0) seq_id = run.by_seq.empty() ? run.next_seq : std::max(run.next_seq, run.by_seq.rbegin()->first + 1);
  if (auto seen = run.by_seq.find(seq_id); seen != run.by_seq.end()) {
    // A retried POST: the request it made, applied once.
    if (seen->second->type != type) {
      return Status(Code::kAlreadyExists,
                    "seq_id " + std::to_string(seq_id) + " of " + run_id + " was already a " + seen->second->type,
                    "seq_id");
    }
    return seen->second;
  }
  if (seq_id < run.next_seq) {
    return Status(Code::kInvalidArgument,
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
  auto f = std::make_shared<LoopFuture>();
  f->id = NewId("req");
  f->org_id = org_id;
  f->run = run_id;
  f->type = type;
  f->seq_id = seq_id;
  op["type"] = type;
  f->op = std::move(op);
  f->created_ms = rt_.clock().NowMs();
  run.by_seq[seq_id] = f;
  run.info.last_request_ms = f->created_ms;
  Remember(f);
  Pump(run);
  return f;
}

void Loops::Pump(RunState& run) {
  if (run.busy || stopping_) return;
  auto next = run.by_seq.find(run.next_seq);
  if (next == run.by_seq.end()) return;
  run.busy = true;
  ++run.next_seq;
  std::shared_ptr<LoopFuture> f = next->second;
  Spawn([this, id = run.info.id, f] { Execute(id, f); });
}

void Loops::Execute(std::string run_id, std::shared_ptr<LoopFuture> f) {
  Status last;
  Json result;
  bool with_restore = false;  // the recipe even to a worker that reports holding the run
  for (int losses = 0, resent = 0;;) {
    auto call = std::make_shared<SampleCall>();
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
      call->kind = "loop";
      call->affinity = run_id;
      call->scope = info.scope;
      call->run = run_id;
      call->task = {{"run", run_id},
                    {"op", f->op},
                    {"version", r.version},
                    {"lora", info.lora},
                    {"base_model_name", info.base_model_name},
                    {"store_prefix", LoopPrefix(info.org_id, run_id)}};
      // A worker holding the run at this version needs no recipe (runtime.h).
      Json restore = {{"snapshot", r.snapshot}, {"replay", r.replay}};
      if (with_restore) call->task["restore"] = std::move(restore);
      else call->restore = std::move(restore);
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
  std::lock_guard<std::mutex> lock(mu_);
  RunState& r = runs_.at(run_id);
  if (last.ok() && LoopOpChangesState(f->type)) {
    ++r.version;
    r.replay.push_back(f->op);
  }
  if (last.ok() && result.contains("snapshot") && result["snapshot"].is_object() &&
      result["snapshot"].value("version", int64_t{-1}) == r.version) {
    // A restore point at the current state: the ops before it are no longer needed.
    r.snapshot = result["snapshot"];
    r.replay.clear();
  }
  if (result.is_object()) f->compute_ms = result.value("compute_ms", 0.0);  // null when it failed
  ++r.info.requests;
  r.info.cold_starts += f->cold;
  r.info.restores += last.ok() && result.contains("restored");
  Json answer = last.ok() ? result.value("result", Json::object()) : Json();
  f->done = true;
  f->result = std::move(answer);
  f->error = last;
  f->finished_ms = rt_.clock().NowMs();
  r.busy = false;
  cv_.notify_all();
  Pump(r);
}

Result<std::shared_ptr<LoopFuture>> Loops::Sample(const std::string& org_id, const std::string& base_model,
                                                  const std::string& base_model_store, BillingScope scope,
                                                  const std::string& run, Json op) {
  auto f = std::make_shared<LoopFuture>();
  auto call = std::make_shared<SampleCall>();
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_) return Status(Code::kUnavailable, "the control plane is shutting down", "");
    f->id = NewId("req");
    f->org_id = org_id;
    f->run = run;
    f->type = "sample";
    op["type"] = "sample";
    f->op = op;
    f->created_ms = rt_.clock().NowMs();
    Remember(f);
    call->org_id = org_id;
    call->base_model = base_model;
    call->kind = "loop";
    call->scope = scope;
    call->run = run;
    call->task = {{"op", op}, {"store_prefix", run.empty() ? "" : LoopPrefix(org_id, run)}};
    if (!base_model_store.empty()) call->task["model_store"] = base_model_store;
    Spawn([this, f, call] { ExecuteSample(f, call); });
  }
  return f;
}

void Loops::ExecuteSample(std::shared_ptr<LoopFuture> f, std::shared_ptr<SampleCall> proto) {
  Status last;
  Json result;
  for (int losses = 0;;) {
    auto call = std::make_shared<SampleCall>(*proto);
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
  std::lock_guard<std::mutex> lock(mu_);
  f->done = true;
  f->result = std::move(result);
  f->error = last;
  f->finished_ms = rt_.clock().NowMs();
  cv_.notify_all();
}

std::vector<std::string> Loops::Sessions(const std::string& org_id) {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<std::string> out;
  for (const auto& [id, s] : sessions_)
    if (s.first == org_id) out.push_back(id);
  return out;
}

Result<std::pair<std::vector<std::string>, std::vector<std::string>>> Loops::SessionContents(
    const std::string& org_id, const std::string& session_id) {
  std::lock_guard<std::mutex> lock(mu_);
  auto s = sessions_.find(session_id);
  if (s == sessions_.end() || s->second.first != org_id) {
    return Status(Code::kNotFound, "no session " + session_id, "session_id");
  }
  std::vector<std::string> runs, samplers;
  for (const auto& [id, r] : runs_)
    if (r.info.session_id == session_id) runs.push_back(id);
  for (const auto& [id, j] : samplers_)
    if (id.rfind(session_id + "-sample-", 0) == 0) samplers.push_back(id);
  return std::make_pair(runs, samplers);
}

std::string Loops::CreateSampler(const std::string& org_id, const std::string& session_id, int64_t seq, Json sampler) {
  std::lock_guard<std::mutex> lock(mu_);
  const std::string id = session_id + "-sample-" + std::to_string(seq);
  sampler["org_id"] = org_id;
  samplers_[id] = std::move(sampler);
  return id;
}

Result<Json> Loops::Sampler(const std::string& org_id, const std::string& sampler_id) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = samplers_.find(sampler_id);
  if (it == samplers_.end() || it->second.value("org_id", "") != org_id) {
    return Status(Code::kNotFound, "no sampling session " + sampler_id, "sampling_session_id");
  }
  return it->second;
}

Status Loops::Parked(const std::string& run_id, const std::string& prefix, int64_t version) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = runs_.find(run_id);
  if (it == runs_.end()) return Status(Code::kNotFound, "no training run " + run_id, "run");
  RunState& r = it->second;
  if (prefix != LoopPrefix(r.info.org_id, run_id) + "snapshots/v" + std::to_string(version) + "/") {
    return Status(Code::kInvalidArgument, "a restore point of " + run_id + " lies in its snapshots/ folder", "prefix");
  }
  if (version == r.version && !r.busy) {
    r.snapshot = {{"prefix", prefix}, {"version", version}};
    r.replay.clear();
  }
  return Status();
}

std::string Loops::IssueArchive(const std::string& prefix, const std::string& name, int64_t expires_ms) {
  std::lock_guard<std::mutex> lock(mu_);
  const int64_t now = rt_.clock().NowMs();
  for (auto it = archives_.begin(); it != archives_.end();) {  // forget expired links
    it = it->second.expires_ms <= now ? archives_.erase(it) : std::next(it);
  }
  const std::string token = NewSecret("arch");
  archives_[Sha256Hex(token)] = {prefix, name, expires_ms};
  return token;
}

Result<std::pair<std::string, std::string>> Loops::Archive(const std::string& token) {
  std::lock_guard<std::mutex> lock(mu_);
  // By the token's digest: the map's comparisons stop at the first byte
  // that differs, and on digests that byte tells a client nothing of any
  // token issued (as worker tokens and API keys are looked up).
  auto it = archives_.find(Sha256Hex(token));
  if (it == archives_.end() || it->second.expires_ms <= rt_.clock().NowMs()) {
    return Status(Code::kNotFound, "no such download link (they last 15 minutes; ask for a new one)", "token");
  }
  return std::make_pair(it->second.prefix, it->second.name);
}

Result<std::shared_ptr<LoopFuture>> Loops::Wait(const std::string& org_id, const std::string& future_id,
                                                int64_t wait_ms) {
  std::unique_lock<std::mutex> lock(mu_);
  auto it = futures_.find(future_id);
  if (it == futures_.end() || it->second->org_id != org_id) {
    return Status(Code::kNotFound, "no request " + future_id + " (results are kept 30 minutes after they are ready)",
                  "request_id");
  }
  std::shared_ptr<LoopFuture> f = it->second;
  cv_.wait_for(lock, std::chrono::milliseconds(wait_ms), [&] { return f->done || stopping_; });
  return f;
}

}  // namespace burst
