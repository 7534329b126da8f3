// Sampling calls: Sample queues a call ahead of training (or on its
// deployment's replicas) and waits for its answer; DispatchSample gives it
// to an idle worker, warm with its base model first; the worker streams
// pieces (SampleChunks, read by NextChunks) and answers (SampleResult).
// CancelCall is the caller going away: the call leaves its queue, or its
// worker is told to stop in the answer to its next sample_chunks and
// reports what it sampled, which is all that is billed.
#include <algorithm>
#include <tuple>

#include "runtime/runtime.h"
#include "runtime/runtime_internal.h"

namespace burst {
using namespace runtime_internal;

namespace {

Status Cancelled(const std::string& why) { return Status(Code::kCancelled, why); }

// As BatchDecoder's shared-prefix prefill (kMinSharedPrefix): worth a batch.
constexpr size_t kSharedPrefix = 16;

std::vector<int64_t> PromptHead(const WorkerCall& call) {
  std::vector<int64_t> head;
  if (!call.loop || !call.task.is_object()) return head;
  const Json op = call.task.value("op", Json::object());
  const Json prompt = op.is_object() ? op.value("prompt", Json()) : Json();
  if (!prompt.is_array()) return head;  // validated by the API: token ids
  for (const Json& t : prompt) {
    if (!t.is_number_integer() || head.size() >= kSharedPrefix) break;
    head.push_back(t.get<int64_t>());
  }
  return head;
}

bool SharesPrefix(const WorkerCall& a, const WorkerCall& b) {
  return a.loop && b.loop && a.loop->prompt_head.size() == kSharedPrefix &&
         a.loop->prompt_head == b.loop->prompt_head;
}
}  // namespace

Runtime::Worker* Runtime::Holder(const WorkerCall& call) {
  if (!call.loop || call.loop->affinity.empty()) return nullptr;
  for (auto& [id, w] : workers_) {
    if (!w.held.count(call.loop->affinity) || !w.rec.deployment.empty()) continue;
    if (w.rec.state == WorkerState::kStopping || !w.rec.job_id.empty()) return nullptr;  // restore elsewhere
    return &w;
  }
  return nullptr;
}

std::vector<DeviceClaim> Runtime::ClaimsOf(const WorkerCall& call) {
  return call.devices.empty() ? std::vector<DeviceClaim>{DeviceClaim{}} : call.devices;
}

bool Runtime::Fits(const Worker& w, const WorkerCall& call) {
  if (call.devices.empty()) return w.on_cpu();
  const DeviceClaim mine = w.claim();
  return std::find(call.devices.begin(), call.devices.end(), mine) != call.devices.end();
}

size_t Runtime::CallsNeedingWorker(const DeviceClaim& claim) {
  size_t n = 0;
  for (const auto& c : samples_.calls()) {
    const std::vector<DeviceClaim> claims = ClaimsOf(*c);
    n += Holder(*c) == nullptr && std::find(claims.begin(), claims.end(), claim) != claims.end();
  }
  return n;
}

bool Runtime::StartWorkerForCall(int64_t now, const std::set<std::string>& blocked) {
  if (!workers_.MayStart(now)) return false;
  // The waiting calls no worker is about to take, by the claims they may
  // run on (a model's calls share theirs), counted once.
  std::vector<std::pair<std::vector<DeviceClaim>, size_t>> needing;
  auto entry = [&](const std::vector<DeviceClaim>& claims) {
    return std::find_if(needing.begin(), needing.end(), [&](const auto& e) { return e.first == claims; });
  };
  for (const auto& c : samples_.calls()) {
    if (Holder(*c) != nullptr) continue;
    const std::vector<DeviceClaim> claims = ClaimsOf(*c);
    if (auto it = entry(claims); it != needing.end()) {
      ++it->second;
    } else {
      needing.emplace_back(claims, 1);
    }
  }
  for (const auto& c : samples_.calls()) {
    if (Holder(*c) != nullptr || !MayTakeWorker(c->org_id)) continue;
    const std::vector<DeviceClaim> claims = ClaimsOf(*c);
    size_t coming = 0;  // workers starting on any of them
    for (const DeviceClaim& claim : claims) coming += static_cast<size_t>(workers_.Starting(claim));
    if (coming >= entry(claims)->second) continue;  // enough are coming
    for (const DeviceClaim& claim : claims) {
      // A CPU task waiting for its place takes the next free CPU slot.
      if (!claim.gpu() && blocked.count("cpu")) continue;
      if (!workers_.HasRoomFor(claim, 1)) continue;
      return StartWorkers(now, 1, c->org_id, c->id, &c->cold, "", c->scope, c->run, claim);
    }
  }
  return false;
}

std::string Runtime::BatchKey(const WorkerCall& call) {
  if (!call.task.is_object()) return "";
  if (call.loop) {
    // A training loop's sample requests (no session held: they read sampler
    // weights) batch with the same run's on the same weights.
    const Json op = call.task.value("op", Json::object());
    if (op.value("type", "") != "sample" || !call.loop->affinity.empty()) return "";
    return "loop\n" + call.base_model + "\n" + op.value("checkpoint_prefix", "") + "\n" + call.org_id + "\n" +
           std::string(ToString(call.scope)) + "\n" + call.run;
  }
  // The weights (base model, checkpoint, full or LoRA), who pays, and how.
  return call.base_model + "\n" + call.task.value("checkpoint_prefix", "") + "\n" +
         (call.task.value("full", false) ? "full" : "lora") + "\n" + call.org_id + "\n" + call.deployment +
         "\n" + std::string(ToString(call.scope)) + "\n" + call.run;
}

bool Runtime::CanJoin(const Worker& w, const WorkerCall& call, int64_t cap) const {
  if (w.rec.state != WorkerState::kBusy || w.calls.empty() || !w.rec.job_id.empty() || !Fits(w, call))
    return false;
  if (static_cast<int64_t>(w.calls.size()) >= cap) return false;
  const std::string key = BatchKey(call);
  return !key.empty() && BatchKey(*w.calls.front()) == key;
}

std::shared_ptr<WorkerCall> Runtime::CallOf(const Worker& w, const std::string& id) {
  for (const auto& c : w.calls)
    if (c->id == id) return c;
  return nullptr;
}

std::shared_ptr<WorkerCall> Runtime::Undelivered(const Worker& w) {
  for (const auto& c : w.calls)
    if (!c->delivered) return c;
  return nullptr;
}

void Runtime::AssignSample(Worker& w, const std::shared_ptr<WorkerCall>& call, int64_t now) {
  const bool first = w.calls.empty();
  call->worker = w.rec.id;
  call->started_ms = now;
  w.calls.push_back(call);
  if (first) {
    w.rec.state = WorkerState::kBusy;
    w.rec.since_ms = now;
    if (w.rec.deployment.empty()) {
      // A pool worker's time is its first call's; calls joining its batch
      // share that time (and pay their own tokens in serverless scope).
      w.rec.job_id.clear();
      w.rec.last_org = call->org_id;
      meter_.Switch(w.rec, w.usage, now, call->loop ? UsageLine::kTraining : UsageLine::kSampling,
                    call->org_id, call->id, call->scope, call->run);
    }
    SaveWorker(w).IgnoreError(kKept);
  }
  cv_.notify_all();
}

int Runtime::SamplingWorkersOf(const std::string& org) const {
  int n = 0;
  for (const auto& [id, w] : workers_) {
    if (!w.rec.deployment.empty() || !w.rec.job_id.empty()) continue;
    n += (!w.calls.empty() && w.calls.front()->org_id == org) ||
         (w.rec.state == WorkerState::kStarting && w.rec.last_org == org);
  }
  return n;
}

bool Runtime::MayTakeWorker(const std::string& org) const {
  if (opt_.max_sampling_workers_per_org <= 0 || SamplingWorkersOf(org) < opt_.max_sampling_workers_per_org)
    return true;
  // Past its share only while no other organisation has sampled lately: a
  // server one team uses keeps all its workers for that team.
  return !samples_.OtherAskedLately(org, clock_.NowMs());
}

bool Runtime::DispatchSample(int64_t now) {
  // Fair: the calls of the organisation holding the fewest pool workers for
  // its calls go first; among equals, the one served least recently, then
  // arrival order. One organisation's queue does not hold back another's
  // next call.
  const auto order = samples_.FairOrder([this](const std::string& org) { return SamplingWorkersOf(org); });
  for (const std::shared_ptr<WorkerCall>& call : order) {
    Worker* pick = Holder(*call);
    if (pick && pick->rec.state != WorkerState::kIdle) continue;  // its holder is busy: wait for it
    const bool may_take = MayTakeWorker(call->org_id);
    // An idle worker another organisation used last stays its own while a
    // slot is free to start one for this call, or one is starting for this
    // organisation: its warm model serves that organisation's next call
    // without a cold start.
    bool own_coming = false;
    for (const DeviceClaim& claim : ClaimsOf(*call)) own_coming |= workers_.HasRoomFor(claim, 1);
    for (const auto& [id, w] : workers_) {
      own_coming |= Fits(w, *call) && w.rec.state == WorkerState::kStarting && w.rec.deployment.empty() &&
                    w.rec.last_org == call->org_id;
    }
    auto may_use = [&](const Worker& w) {
      return !own_coming || w.rec.last_org.empty() || w.rec.last_org == call->org_id;
    };
    if (!pick) {
      // A batch on the same weights whose calls share this prompt's prefix
      // (a ticket's label-scoring calls: prefilled once there), then an idle
      // worker with the base model warm, then a batch already decoding the
      // same weights (fewest calls first), then any idle one. An
      // organisation at its share of workers only joins its batches.
      Worker* sharing = nullptr;
      Worker* warm = nullptr;
      Worker* joinable = nullptr;
      for (auto& [id, w] : workers_) {
        if (!w.rec.deployment.empty() || !Fits(w, *call)) continue;  // on a device the call may use
        if (w.rec.state == WorkerState::kIdle && w.calls.empty()) {
          if (may_take && may_use(w) && !warm && w.rec.model == call->base_model) warm = &w;
        } else if (CanJoin(w, *call, opt_.max_batch_calls)) {
          auto shares = [&](const std::shared_ptr<WorkerCall>& c) { return SharesPrefix(*c, *call); };
          if (!sharing && std::any_of(w.calls.begin(), w.calls.end(), shares)) sharing = &w;
          if (!joinable || w.calls.size() < joinable->calls.size()) joinable = &w;
        }
      }
      pick = sharing ? sharing : warm ? warm : joinable;
      if (!pick && may_take) {
        for (auto& [id, w] : workers_) {
          if (Fits(w, *call) && w.rec.deployment.empty() && w.rec.state == WorkerState::kIdle &&
              w.calls.empty() && may_use(w)) {
            pick = &w;
            break;
          }
        }
      }
    }
    if (!pick) continue;  // DispatchOne starts a worker for it, if it may have one
    samples_.Took(call, ++serve_counter_);
    AssignSample(*pick, call, now);
    return true;
  }
  return false;
}

void Runtime::EndSample(Worker& w, int64_t now) {
  for (const auto& call : w.calls) {
    if (!call->done) {
      call->Finish();
      call->error =
          Status(Code::kUnavailable, "the worker running this sampling call went away; retry", "model");
    }
    call->finished_ms = now;
  }
  w.calls.clear();
  cv_.notify_all();
}

void Runtime::Unqueue(const std::shared_ptr<WorkerCall>& call) {
  samples_.Remove(call);
  deployments_.Unqueue(call);
}

std::shared_ptr<WorkerCall> Runtime::Sample(std::shared_ptr<WorkerCall> call, int64_t wait_ms,
                                            bool until_started) {
  if (call->model_name.empty() && call->task.is_object()) {
    const Json req = call->task.value("request", Json::object());
    if (req.is_object() && req.value("model", Json()).is_string())
      call->model_name = req["model"].get<std::string>();
  }
  if (call->deployment.empty() && opt_.call_devices) {
    // The model's devices (its catalog entry read from disk: before the lock).
    auto devices = opt_.call_devices(call->base_model, call->model_name);
    if (!devices.ok()) {
      std::lock_guard<std::mutex> lock(mu_);  // as every end of a call (CancelCall reads it)
      call->Finish();
      call->error = devices.status();
      return call;
    }
    call->devices = std::move(devices).value();
  }
  std::unique_lock<std::mutex> lock(mu_);
  const int64_t now = clock_.NowMs();
  if (stopping_) {
    call->Finish();
    call->error = Status(Code::kUnavailable, "the control plane is shutting down; retry", "");
    return call;
  }
  // Each organisation has its own share of the waiting queue: past it, say
  // so at once (its calls hold request threads of its own share).
  size_t waiting = 0;
  waiting += samples_.WaitingOf(call->org_id);
  waiting += deployments_.WaitingOf(call->org_id);
  if (static_cast<int64_t>(waiting) >= opt_.max_waiting_samples) {
    call->Finish();
    call->error = Status(Code::kResourceExhausted,
                         "your organisation already has " + std::to_string(waiting) +
                             " sampling calls waiting for a worker; retry later",
                         "", "capacity");
    return call;
  }
  if (opt_.max_sampling_calls_per_org > 0) {
    int in_flight = 0;
    in_flight += static_cast<int>(samples_.WaitingOf(call->org_id) + deployments_.WaitingOf(call->org_id));
    for (const auto& [id, w] : workers_)
      for (const auto& c : w.calls) in_flight += c->org_id == call->org_id;
    if (in_flight >= opt_.max_sampling_calls_per_org) {
      call->Finish();
      call->error = Status(Code::kResourceExhausted,
                           "your organisation has " + std::to_string(in_flight) +
                               " sampling calls in flight, its limit (" +
                               std::to_string(opt_.max_sampling_calls_per_org) + ")",
                           "max_sampling_calls", "org_cap");
      return call;
    }
  }
  call->created_ms = now;
  if (call->loop) call->loop->prompt_head = PromptHead(*call);
  samples_.Asked(call->org_id, now);
  if (!call->deployment.empty()) {
    LiveDeployment* d = deployments_.Find(call->deployment);
    if (d == nullptr) {
      call->Finish();
      call->error = Status(Code::kNotFound, "deployment " + call->deployment + " was deleted", "model");
      return call;
    }
    d->waiting.push_back(call);
  } else {
    samples_.Push(call);
  }
  while (DispatchOne(now)) {
  }
  int64_t deadline = now + wait_ms;
  while (!call->done && !(until_started && !call->worker.empty())) {
    if (clock_.WaitUntil(cv_, lock, deadline)) continue;
    if (call->worker.empty()) {
      // Still waiting for a worker: the pool is full (capacity, not quota).
      Unqueue(call);
      call->Finish();
      call->error = Status(Code::kResourceExhausted,
                           "no worker became free within " + std::to_string(wait_ms / 1000) +
                               " s: every slot is busy; retry later",
                           "", "capacity");
      break;
    }
    // Running: its answer comes (a stuck worker is stopped by Tick).
    deadline = clock_.NowMs() + 1000;
  }
  return call;
}

std::vector<Json> Runtime::NextChunks(const std::shared_ptr<WorkerCall>& call, int64_t wait_ms, bool* done) {
  std::unique_lock<std::mutex> lock(mu_);
  const int64_t deadline = clock_.NowMs() + wait_ms;
  while (call->chunks.empty() && !call->done) {
    if (!clock_.WaitUntil(call->changed, lock, deadline)) break;
  }
  std::vector<Json> out(std::make_move_iterator(call->chunks.begin()),
                        std::make_move_iterator(call->chunks.end()));
  call->chunks.clear();
  *done = call->done;
  return out;
}

void Runtime::CancelCall(const std::shared_ptr<WorkerCall>& call) {
  std::lock_guard<std::mutex> lock(mu_);
  if (call->done || call->cancelled) return;
  const int64_t now = clock_.NowMs();
  auto w = call->worker.empty() ? workers_.end() : workers_.find(call->worker);
  if (w == workers_.end() || CallOf(w->second, call->id) != call) {
    // Not on a worker yet: nothing ran, nothing is billed.
    Unqueue(call);
    call->Finish();
    call->error = Cancelled("the caller went away before a worker took the call");
    call->finished_ms = now;
    cv_.notify_all();
    return;
  }
  Worker& worker = w->second;
  if (!call->delivered) {
    // Assigned but not yet taken: the worker never hears of it and is free
    // at once.
    call->Finish();
    call->error = Cancelled("the caller went away before the worker took the call");
    Release(worker, call, now);
    return;
  }
  call->cancelled = true;
  call->cancel_at_ms = now;
}

Status Runtime::SampleChunks(const std::string& worker_id, const std::string& call_id, const Json& chunks) {
  bool cancel = false;
  return SampleChunks(worker_id, call_id, chunks, &cancel);
}

Status Runtime::SampleChunks(const std::string& worker_id, const std::string& call_id, const Json& chunks,
                             bool* cancel) {
  std::lock_guard<std::mutex> lock(mu_);
  *cancel = false;
  auto it = workers_.find(worker_id);
  std::shared_ptr<WorkerCall> held = it == workers_.end() ? nullptr : CallOf(it->second, call_id);
  if (!held) return LeaseLost("sampling call " + call_id + " is not " + worker_id + "'s");
  WorkerCall& call = *held;
  if (call.cancelled) {
    *cancel = true;  // nobody reads the pieces any more
    return Status();
  }
  for (const Json& c : chunks) call.chunks.push_back(c);
  call.changed.notify_all();  // only its stream waits for pieces
  return Status();
}

Status Runtime::SampleResult(const std::string& worker_id, const std::string& call_id, const Json& result,
                             const Json& error) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = workers_.find(worker_id);
  std::shared_ptr<WorkerCall> call = it == workers_.end() ? nullptr : CallOf(it->second, call_id);
  if (!call) return LeaseLost("sampling call " + call_id + " is not " + worker_id + "'s");
  Worker& w = it->second;
  const int64_t now = clock_.NowMs();
  call->Finish();
  if (error.is_object()) {
    call->error = StatusFromJson(error);
  } else if (!result.is_object() || (!call->loop && !result.contains("samples"))) {
    call->error = Status(Code::kInternal, "the worker answered without samples", "");
  } else {
    call->result = result;
    if (result.value("loaded", false)) call->cold = true;  // it waited for a model load
  }
  // A loop call it answered leaves the run on it (restored there if it was
  // not): the run's next request goes to it, before its next lease says so.
  if (call->loop && !call->loop->affinity.empty() && call->error.ok()) w.held.insert(call->loop->affinity);
  const std::string dep = call->deployment;
  if (!dep.empty()) {
    if (Status s = md_.CountDeploymentRequest(dep, now, call->cold); !s.ok()) {
      LogFailure("cannot count call " + call_id + " on deployment " + dep, s);  // a statistic, not billing
    }
  }
  // Serverless scope bills the tokens the worker reports it ran: all of an
  // answered call, what a cancelled one sampled before it stopped.
  if (call->loop && call->scope == BillingScope::kServerless && result.is_object()) {
    // A loop request's tokens: prefill (forward), trained (forward_backward), sampled.
    const Json u = result.value("usage", Json::object());
    const int64_t prefill = u.value("prefill_tokens", int64_t{0}),
                  trained = u.value("trained_tokens", int64_t{0}),
                  sampled = u.value("sampled_tokens", int64_t{0});
    if (prefill + trained + sampled > 0) {
      Meter::Charge(w.usage, now, trained > 0 ? UsageLine::kTraining : UsageLine::kSampling, call->org_id,
                    call_id, call->run, prefill + trained + sampled,
                    (static_cast<double>(prefill) * opt_.price_prefill_per_mtok +
                     static_cast<double>(trained) * opt_.price_train_per_mtok +
                     static_cast<double>(sampled) * opt_.price_sample_per_mtok) /
                        1e6);
    }
  } else if (call->scope == BillingScope::kServerless && result.is_object()) {
    const int64_t prefill = result.value("prompt_tokens", int64_t{0});
    int64_t sampled = 0;
    for (const Json& smp : result.value("samples", Json::array())) {
      sampled += static_cast<int64_t>(smp.value("token_ids", Json::array()).size());
    }
    Meter::Charge(w.usage, now, dep.empty() ? UsageLine::kSampling : UsageLine::kDeployment, call->org_id,
                  dep.empty() ? call_id : dep, call->run, prefill + sampled,
                  (static_cast<double>(prefill) * opt_.price_prefill_per_mtok +
                   static_cast<double>(sampled) * opt_.price_sample_per_mtok) /
                      1e6);
  }
  Release(w, call, now);
  return Status();
}

void Runtime::Release(Worker& w, const std::shared_ptr<WorkerCall>& call, int64_t now) {
  call->finished_ms = now;
  w.calls.erase(std::remove(w.calls.begin(), w.calls.end(), call), w.calls.end());
  cv_.notify_all();
  if (!w.calls.empty()) {  // the rest of its batch goes on
    // Room for one more call in its batch.
    while (DispatchOne(now)) {
    }
    return;
  }
  BackToIdle(w, now, w.rec.last_org);
  SaveWorker(w).IgnoreError(kKept);
  while (DispatchOne(now)) {
  }
}

}  // namespace burst
