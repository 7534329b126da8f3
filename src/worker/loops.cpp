#include "worker/loops.h"

#include <chrono>
#include <cmath>
#include <cstdio>
#include <random>

#include "core/fs.h"
#include "model/hf_io.h"
#include "model/safetensors.h"
#include "model/sampler.h"
#include "train/checkpoint.h"
#include "train/loop_data.h"

namespace burst {

namespace fs = std::filesystem;

namespace {

// A restore point is written after this many state changes without one.
constexpr int64_t kSnapshotEvery = 16;
// Runs a worker keeps in memory; past it, the least recently used is
// dropped (its next request restores it: the same bits, more time).
constexpr size_t kMaxHeldRuns = 16;

int64_t UnixSeconds() {
  return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

LoopLoraOptions LoraOf(const Json& lora) {
  LoopLoraOptions o;
  o.rank = lora.value("rank", int64_t{32});
  o.seed = lora.value("seed", uint64_t{0});
  o.train_attn = lora.value("train_attn", true);
  o.train_mlp = lora.value("train_mlp", true);
  o.train_unembed = lora.value("train_unembed", true);
  o.alpha = static_cast<double>(o.rank);  // scale 1, as Tinker's adapters
  return o;
}

LoopAdamParams AdamOf(const Json& a) {
  LoopAdamParams p;
  p.learning_rate = a.value("learning_rate", p.learning_rate);
  p.beta1 = a.value("beta1", p.beta1);
  p.beta2 = a.value("beta2", p.beta2);
  p.eps = a.value("eps", p.eps);
  p.weight_decay = a.value("weight_decay", p.weight_decay);
  p.grad_clip_norm = a.value("grad_clip_norm", p.grad_clip_norm);
  return p;
}

std::map<std::string, double> ConfigOf(const Json& c) {
  std::map<std::string, double> out;
  if (c.is_object())
    for (const auto& [k, v] : c.items()) out[k] = v.get<double>();
  return out;
}

}  // namespace

Json LoopRuns::HeldRuns() const {
  Json out = Json::array();
  for (const auto& [id, h] : runs_) out.push_back(id);
  return out;
}

void LoopRuns::Drop(const Json& run_ids) {
  if (!run_ids.is_array()) return;
  for (const Json& id : run_ids) {
    if (!id.is_string() || runs_.erase(id.get<std::string>()) == 0) continue;
    std::fprintf(stderr, "%s training run %s let go: its owner deactivated it\n", LogStamp().c_str(),
                 id.get<std::string>().c_str());
  }
}

TensorMap LoopRuns::LoadState(const std::string& prefix) {
  const fs::path dir = dir_ / "restore";
  fs::remove_all(dir);
  auto objects = store_.List(prefix);
  if (!objects.ok()) throw Error(objects.status());
  if (objects.value().empty())
    throw Error(Code::kNotFound, "checkpoint " + prefix + " is not in the store", "path");
  for (const ObjectInfo& o : objects.value()) {
    const fs::path dst = dir / o.key.substr(prefix.size());
    fs::create_directories(dst.parent_path());
    if (Status s = store_.GetToFile(o.key, dst); !s.ok()) throw Error(s);
  }
  if (Status s = VerifyManifest(dir, "loop-state"); !s.ok()) throw Error(s);
  return ReadSafetensors(dir / "state.safetensors");
}

void LoopRuns::SaveState(const LoopRun& s, const std::string& prefix, int64_t version) {
  const fs::path dir = dir_ / "save-state";
  fs::remove_all(dir);
  fs::create_directories(dir);
  WriteSafetensors(dir / "state.safetensors", s.State(), {{"format", "pt"}});
  CommitManifest(dir, "loop-state", {{"run_version", version}, {"step", s.steps()}, {"time", UnixSeconds()}});
  for (const char* name : {"state.safetensors", "manifest.json"}) {  // the manifest last
    if (Status st = store_.PutFile(prefix + name, dir / name); !st.ok()) throw Error(st);
  }
}

void LoopRuns::SaveSampler(const LoopRun& s, const std::string& prefix, const std::string& base_name) {
  const fs::path dir = dir_ / "save-sampler";
  fs::remove_all(dir);
  SaveAdapter(s.model(), dir, base_name);
  CommitManifest(dir, "peft-lora", {{"step", s.steps()}, {"time", UnixSeconds()}});
  for (const char* name : {"adapter_model.safetensors", "adapter_config.json", "manifest.json"}) {
    if (Status st = store_.PutFile(prefix + name, dir / name); !st.ok()) throw Error(st);
  }
}

LoopRuns::Held& LoopRuns::Restore(const Json& task, const std::shared_ptr<const BaseModel>& base) {
  const std::string run = task.at("run").get<std::string>();
  const int64_t version = task.value("version", int64_t{0});
  auto it = runs_.find(run);
  if (it != runs_.end() && it->second.version == version && it->second.base == base) {
    it->second.last_used = ++uses_;
    return it->second;
  }
  runs_.erase(run);
  if (!task.contains("restore")) {
    // The control plane sends no recipe to a worker whose lease said it holds the run.
    throw Error(Status(Code::kFailedPrecondition,
                       "this worker does not hold " + run + " at version " + std::to_string(version) +
                           " and got no restore recipe",
                       "restore"));
  }
  // Rebuild: the snapshot (or a fresh adapter), then the changes after it.
  Held h;
  h.base = base;
  h.run = std::make_unique<LoopRun>(base->model, LoraOf(task.at("lora")));
  const Json& restore = task.at("restore");
  const Json& snap = restore.value("snapshot", Json());
  if (snap.is_object()) {
    h.run->LoadState(LoadState(snap.at("prefix").get<std::string>()), /*with_optimizer=*/true);
    h.version = snap.at("version").get<int64_t>();
  }
  h.snapshot_version = h.version;
  h.store_prefix = task.value("store_prefix", "");
  Json ignored;
  for (const Json& op : restore.value("replay", Json::array())) {
    Apply(h, op, task, &ignored);
    ++h.version;
  }
  if (h.version != version) {
    throw Error(Code::kInternal, "restoring " + run + " reached version " + std::to_string(h.version) +
                                     ", the control plane says " + std::to_string(version));
  }
  std::fprintf(stderr, "%s restored %s at version %lld (%zu requests replayed)\n", LogStamp().c_str(),
               run.c_str(), static_cast<long long>(version), restore.value("replay", Json::array()).size());
  if (version > 0) {  // a run with a past (a new one is only built)
    restored_ = {{"replayed", restore.value("replay", Json::array()).size()},
                 {"from_snapshot", snap.is_object()}};
  }
  h.last_used = ++uses_;
  while (runs_.size() >= kMaxHeldRuns) {
    auto oldest = runs_.begin();
    for (auto r = runs_.begin(); r != runs_.end(); ++r)
      if (r->second.last_used < oldest->second.last_used) oldest = r;
    runs_.erase(oldest);
  }
  return runs_[run] = std::move(h);
}

Json LoopRuns::Apply(Held& h, const Json& op, const Json& task, Json* usage) {
  LoopRun& s = *h.run;
  const std::string type = op.at("type").get<std::string>();
  if (type == "forward_backward" || type == "forward") {
    const std::string loss_fn = op.at("loss_fn").get<std::string>();
    const LlamaConfig& c = h.base->model.config;
    const std::vector<LoopDatum> data =
        ParseLoopData(op.at("data"), loss_fn, LoopDataLimits{c.vocab_size, 0, 0}, "data");
    LoopForwardResult r =
        s.Forward(data, loss_fn, ConfigOf(op.value("loss_fn_config", Json())), type == "forward_backward");
    Json outputs = Json::array();
    for (const auto& o : r.outputs)
      outputs.push_back({{"logprobs", o.at("logprobs")}, {"elementwise_loss", o.at("elementwise_loss")}});
    (*usage)[type == "forward" ? "prefill_tokens" : "trained_tokens"] = r.tokens;
    return {{"loss_fn_outputs", outputs}, {"metrics", {{"loss:sum", r.loss_sum}}}};
  }
  if (type == "optim_step")
    return {{"metrics", s.OptimStep(AdamOf(op.value("adam_params", Json::object())))}};
  if (type == "load_weights") {
    s.LoadState(LoadState(op.at("prefix").get<std::string>()), op.value("optimizer", false));
    return {{"path", op.value("path", "")}, {"model_id", task.value("run", "")}, {"type", "load_weights"}};
  }
  if (type == "save_weights") {
    SaveState(s, op.at("prefix").get<std::string>(), h.version);
    return {{"path", op.at("path")}, {"type", "save_weights"}};
  }
  if (type == "save_weights_for_sampler" || type == "save_weights_external") {
    // The adapter in PEFT's layout, both to sample from and to download.
    SaveSampler(s, op.at("prefix").get<std::string>(), task.value("base_model_name", ""));
    return {{"path", op.at("path")}, {"type", type}};
  }
  throw Error(Code::kInvalidArgument, "unknown loop request type \"" + type + "\"", "type");
}

Json LoopRuns::Run(const Json& task) {
  const Json& op = task.at("op");
  const std::string type = op.at("type").get<std::string>();
  // (Sample requests go to worker/sample_calls.h, decoded in a batch.)
  auto base = models_.Get(task);
  const std::string run = task.at("run").get<std::string>();
  try {
    restored_ = Json();
    Held& h = Restore(task, base);
    Json usage = Json::object();
    Json result = Apply(h, op, task, &usage);
    Json out = {{"result", result}, {"usage", usage}};
    if (!restored_.is_null()) out["restored"] = restored_;
    if (LoopOpChangesState(type)) ++h.version;
    // Requests since the run's last restore point (the one it was built from, or wrote).
    const int64_t since = h.version - h.snapshot_version;
    if (!h.run->has_pending_grads() &&
        (type == "save_weights" ||
         (LoopOpChangesState(type) && (since >= kSnapshotEvery || task.value("snapshot_soon", false))))) {
      // A restore point: the control plane stops keeping the requests before it.
      std::string prefix = type == "save_weights" ? op.at("prefix").get<std::string>()
                                                  : task.at("store_prefix").get<std::string>() +
                                                        "snapshots/v" + std::to_string(h.version) + "/";
      if (type != "save_weights") SaveState(*h.run, prefix, h.version);
      out["snapshot"] = {{"prefix", prefix}, {"version", h.version}};
      h.snapshot_version = h.version;
    }
    return out;
  } catch (...) {
    runs_.erase(run);  // possibly half changed: the next request restores it
    throw;
  }
}

void LoopRuns::Park(ControlPlane& cp) {
  for (auto& [run, h] : runs_) {
    if (h.version == h.snapshot_version || h.run->has_pending_grads() || h.store_prefix.empty()) continue;
    const std::string prefix = h.store_prefix + "snapshots/v" + std::to_string(h.version) + "/";
    Status s = Try([&] { SaveState(*h.run, prefix, h.version); });
    if (s.ok()) {
      Reply r = cp.Post("loop_snapshot", {{"run", run}, {"prefix", prefix}, {"version", h.version}});
      if (r.status != 200) s = Status(Code::kUnavailable, r.error);
    }
    // Not parked: the next worker replays instead (slower, the same bits).
    std::fprintf(stderr, "%s parked %s at version %lld%s\n", LogStamp().c_str(), run.c_str(),
                 static_cast<long long>(h.version), s.ok() ? "" : (": not kept: " + s.ToString()).c_str());
  }
}

void RunLoopCall(ControlPlane& cp, const Json& task, LoopRuns& loops) {
  const std::string id = task.value("id", "");
  Json result;
  const auto t0 = std::chrono::steady_clock::now();
  Status s = Try([&] { result = loops.Run(task); });
  Json body = {{"id", id}};
  if (s.ok()) {
    // The worker's own time on it (restoring included), so a client can tell compute from overhead.
    result["compute_ms"] =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    body["result"] = result;
  } else {
    body["error"] = StatusJson(s);
  }
  Reply r = cp.PostRetrying("sample_result", body, 60);
  if (r.status != 200) {
    std::fprintf(stderr, "%s loop call %s: result not accepted: %s\n", LogStamp().c_str(), id.c_str(),
                 r.error.c_str());
  }
}

}  // namespace burst
