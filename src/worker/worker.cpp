#include "worker/worker.h"

#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <mutex>
#include <sstream>
#include <thread>

#include "core/fs.h"
#include "core/json.h"
#include "core/states.h"
#include "model/cpu_threads.h"
#include "store/keys.h"
#include "store/object_store.h"
#include "train/checkpoint.h"
#include "train/data.h"
#include "train/eval.h"
#include "train/recipe.h"
#include "train/trainer.h"
#include "worker/base_models.h"
#include "worker/batch_run.h"
#include "worker/control_plane.h"
#include "worker/gang.h"
#include "worker/loops.h"
#include "worker/sample_calls.h"
#include "worker/samplers.h"

namespace burst {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

std::atomic<int> g_term{0};
void OnTerm(int sig) { g_term.store(sig); }

// Runs a task's work, turning any exception into a Status. A full disk is
// resource_exhausted naming the path whoever hit it: Burst's own writers say
// so already; std::filesystem (folders, copies) is mapped here.
Status TryTask(const std::function<void()>& fn) {
  try {
    fn();
    return Status();
  } catch (const fs::filesystem_error& e) {
    if (IsDiskFull(e.code().value()))
      return IoStatus(e.code().value(), "cannot write", e.path1(), Code::kInternal);
    return CurrentExceptionToStatus();
  } catch (...) {
    return CurrentExceptionToStatus();
  }
}

// ----------------------------------------------------------------------------
// one task

class TaskRun {
 public:
  TaskRun(const WorkerConfig& cfg, const Json& task, ObjectStore& store, BaseModels& models,
          double heartbeat_s)
      : cfg_(cfg),
        task_(task),
        store_(store),
        models_(models),
        heartbeat_s_(heartbeat_s),
        cp_(cfg.url, cfg.token),
        hb_cp_(cfg.url, cfg.token) {
    job_ = task.at("job").get<std::string>();
    attempt_ = task.at("attempt").get<int64_t>();
    prefix_ = task.at("store_prefix").get<std::string>();  // the job's folder (store/keys.h)
    total_ = task.value("total_steps", int64_t{0});
  }

  // A training task, or with `samplers` an evaluation task (TaskKind::kEval).
  void Run(TaskKind kind, Samplers* samplers = nullptr);

 private:
  // Loads the eval file and the model (a checkpoint's adapter on the warm
  // base model) and evaluates; the finish result carries the record.
  Json RunEval(Samplers& samplers);
  Json RunBatchTask(Samplers& samplers);
  void Log(const std::string& line, bool event = true, const std::string& level = "info");
  // A metrics event (its message logged too) into the outbox.
  void Metrics(const std::string& message, const Json& data);
  void Flush(bool must);
  void Heartbeats();
  void Fetch();
  void Upload(int64_t step, const fs::path& step_dir);
  Json Body(Json extra) const {
    extra["job"] = job_;
    extra["attempt"] = attempt_;
    return extra;
  }

  const WorkerConfig& cfg_;
  Json task_;
  ObjectStore& store_;
  BaseModels& models_;
  double heartbeat_s_;
  ControlPlane cp_, hb_cp_;  // one connection per thread
  std::string job_, prefix_;
  int64_t attempt_ = 0, total_ = 0;
  fs::path run_;

  std::mutex mu_;  // guards the outbox
  Json events_ = Json::array();
  Json logs_ = Json::array();
  Clock::time_point last_flush_ = Clock::now();

  std::atomic<bool> cancel_{false}, lost_{false}, done_{false};
  std::atomic<bool> finishing_{false};  // the finish is being sent: a 409 to a heartbeat is expected
  std::atomic<int64_t> step_{0};
  std::mutex hb_mu_;
  std::condition_variable hb_cv_;
  Json last_train_, last_eval_;
  Json baseline_;  // the base model's eval (step 0), carried by every checkpoint's metrics
  int rank_ = 0;   // in the job's gang (0: rank 0, or a job on one worker)
  // The finish result's "timing": this attempt's steps, their mean time and
  // exchange, the gang and what it exchanged.
  Json Timing(const TrainResult& r) const {
    const Json member = task_.value("member", Json::object());
    const double n = static_cast<double>(std::max<int64_t>(1, share_.steps));
    return {{"steps", share_.steps},
            {"step_s", share_.step_s / n},
            {"exchange_s", share_.exchange_s / n},
            {"workers", member.value("size", 1)},
            {"communication", member.value("communication", Json())},
            {"average_every", member.value("average_every", int64_t{0})},
            {"trainable_floats", r.trainable_floats},
            // What it ran on: the estimates of later jobs weigh only the same.
            {"device", cfg_.device},
            {"gpus", cfg_.device == "cpu" ? int64_t{0} : static_cast<int64_t>(torch::cuda::device_count())}};
  }
  // This attempt's steps, from their metrics lines: a gang member's share
  // of the work, and what the cost model is measured on (the finish
  // result's "timing"; docs/cost-model.md).
  struct Share {
    int64_t steps = 0, member_tokens = 0, step_tokens = 0;
    double exchange_s = 0, step_s = 0;
    void Add(const Json& line) {
      ++steps;
      member_tokens += line.value("member_tokens", int64_t{0});
      step_tokens += line.value("step_tokens", int64_t{0});
      exchange_s += line.value("exchange_s", 0.0);
      step_s += line.value("step_s", 0.0);
    }
    std::string Describe() const {
      char buf[200];
      std::snprintf(
          buf, sizeof buf, "%lld steps, %lld tokens (%.0f%% of the gang's), exchange %.2f s",
          static_cast<long long>(steps), static_cast<long long>(member_tokens),
          100.0 * static_cast<double>(member_tokens) / static_cast<double>(std::max<int64_t>(1, step_tokens)),
          exchange_s);
      return buf;
    }
  } share_;
};

void TaskRun::Log(const std::string& line, bool event, const std::string& level) {
  std::fprintf(stderr, "%s %s attempt %lld: %s\n", LogStamp().c_str(), job_.c_str(),
               static_cast<long long>(attempt_), line.c_str());
  std::lock_guard<std::mutex> lock(mu_);
  logs_.push_back(LogStamp() + " " + line);
  if (event) events_.push_back({{"level", level}, {"type", "message"}, {"message", line}});
}

void TaskRun::Metrics(const std::string& message, const Json& data) {
  std::lock_guard<std::mutex> lock(mu_);
  events_.push_back({{"level", "info"}, {"type", "metrics"}, {"message", message}, {"data", data}});
  logs_.push_back(LogStamp() + " " + message);
}

// Sends what the outbox holds. `must`: keep trying until the control plane
// takes it (or the lease is gone); otherwise one try, keeping it on failure.
void TaskRun::Flush(bool must) {
  Json events, logs;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (events_.empty() && logs_.empty()) return;
    events = std::exchange(events_, Json::array());
    logs = std::exchange(logs_, Json::array());
    last_flush_ = Clock::now();
  }
  Json body = Body({{"events", events}, {"logs", logs}});
  Reply r = must ? cp_.PostRetrying("events", body) : cp_.Post("events", body);
  if (r.status == 409) {
    lost_ = true;
    return;
  }
  if (r.status != 200) {
    std::lock_guard<std::mutex> lock(mu_);  // keep them, in order, for the next try
    for (auto& e : events_) events.push_back(e);
    for (auto& l : logs_) logs.push_back(l);
    events_ = std::move(events);
    logs_ = std::move(logs);
  }
}

void TaskRun::Heartbeats() {
  std::unique_lock<std::mutex> lock(hb_mu_);
  while (!done_) {
    hb_cv_.wait_for(lock, std::chrono::duration<double>(heartbeat_s_), [this] { return done_.load(); });
    if (done_) break;
    lock.unlock();
    Reply r = hb_cp_.Post("heartbeat", Body({{"step", step_.load()}}));
    if (r.status == 409 || r.status == 401) {  // 401: the control plane no longer knows this worker
      if (finishing_) break;                   // the finish was taken meanwhile: that ended the lease
      lost_ = true;
      std::fprintf(stderr, "%s %s: lease lost (%s); dropping the task\n", LogStamp().c_str(), job_.c_str(),
                   r.error.c_str());
    } else if (r.status == 200 && r.body.value("action", "") == "cancel") {
      cancel_ = true;
    }
    lock.lock();
  }
}

void TaskRun::Fetch() {
  fs::create_directories(run_);
  auto get = [&](const std::string& key, const fs::path& dst) {
    if (Status s = store_.GetToFile(key, dst); !s.ok()) throw Error(s);
  };
  get(task_.at("train_key").get<std::string>(), run_ / "train.jsonl");
  if (!task_.value("valid_key", "").empty()) get(task_["valid_key"].get<std::string>(), run_ / "valid.jsonl");
  const int64_t resume = task_.value("resume_step", int64_t{0});
  if (resume <= 0) return;
  // The newest committed state checkpoint and the metrics up to it.
  const std::string state = StatePrefix(CheckpointPrefix(prefix_, resume));
  auto objects = store_.List(state);
  if (!objects.ok()) throw Error(objects.status());
  fs::path dst = run_ / "checkpoints" / StepDirName(resume) / "state";
  fs::create_directories(dst);
  for (const ObjectInfo& o : objects.value()) get(o.key, dst / o.key.substr(state.size()));
  if (store_.Stat(MetricsKey(prefix_)).ok()) get(MetricsKey(prefix_), run_ / "metrics.jsonl");
  Log("fetched state checkpoint step " + std::to_string(resume) + " (" +
      std::to_string(objects.value().size()) + " files) from the store");
}

// Each folder's files first, its manifest last: a reader that finds the
// manifest finds the files (docs/design.md, invariant 2).
void TaskRun::Upload(int64_t step, const fs::path& step_dir) {
  auto t0 = Clock::now();
  const std::string base = CheckpointPrefix(prefix_, step);
  // The run folder's halves and their places in the store.
  const std::pair<const char*, std::string> parts[] = {{"sampler", SamplerPrefix(base)},
                                                       {"state", StatePrefix(base)}};
  int64_t bytes = 0;
  for (const auto& [part, prefix] : parts) {
    fs::path dir = step_dir / part;
    std::vector<fs::path> files;
    for (const auto& e : fs::recursive_directory_iterator(dir))
      if (e.is_regular_file() && e.path().filename() != "manifest.json") files.push_back(e.path());
    files.push_back(dir / "manifest.json");
    for (const fs::path& f : files) {
      const std::string key = prefix + fs::relative(f, dir).string();
      if (Status s = store_.PutFile(key, f); !s.ok()) throw Error(s);
      bytes += static_cast<int64_t>(fs::file_size(f));
    }
  }
  const double upload_s = SecondsSince(t0);
  if (fs::exists(run_ / "metrics.jsonl")) {
    if (Status s = store_.PutFile(MetricsKey(prefix_), run_ / "metrics.jsonl"); !s.ok()) throw Error(s);
  }
  Json metrics = {{"step", step}};
  if (last_train_.is_object()) metrics["train_loss"] = last_train_.value("train_loss", 0.0);
  if (baseline_.is_object()) {
    Json b = Json::object();
    for (const char* k : {"eval_loss", "eval_token_acc", "eval_exact_match", "eval_label_acc"})
      if (baseline_.contains(k)) b[k] = baseline_[k];
    metrics["baseline"] = b;
  }
  if (last_eval_.is_object() && last_eval_.value("step", -1) == step) {
    for (const char* k : {"eval_loss", "eval_token_acc", "eval_exact_match", "eval_label_acc"})
      if (last_eval_.contains(k)) metrics[k] = last_eval_[k];
    metrics["valid_loss"] = last_eval_.value("eval_loss", 0.0);
    metrics["valid_mean_token_accuracy"] = last_eval_.value("eval_token_acc", 0.0);
  }
  Log("checkpoint step " + std::to_string(step) + " uploaded in " +
          std::to_string(SecondsSince(t0)).substr(0, 4) + " s",
      false);
  Flush(true);
  Json body = {{"step", step}, {"metrics", metrics}, {"bytes", bytes}, {"upload_s", upload_s}};
  // What the state was written with, on the CPU (where the BLAS computes):
  // the control plane routes the job's next attempt by it.
  const Json st =
      Json::parse(ReadFile(step_dir / "state" / "state.json"), nullptr, /*allow_exceptions=*/false);
  if (st.is_object() && st.value("device", "") == "cpu") {
    body["blas"] = st.value("blas", "");
    body["blas_library"] = st.value("blas_library", "");
  }
  Reply r = cp_.PostRetrying("checkpoint", Body(body));
  if (r.status == 409) lost_ = true;
}

void TaskRun::Run(TaskKind kind, Samplers* samplers) {
  run_ = fs::path(cfg_.dir) / job_;
  fs::remove_all(run_);
  std::thread hb([this] { Heartbeats(); });
  AttemptOutcome outcome = AttemptOutcome::kCompleted;
  Json error;
  bool retryable = false;
  TrainResult result;
  const int64_t resume = task_.value("resume_step", int64_t{0});
  // The BLAS it computes with goes on the job's record: a resume elsewhere
  // needs the same (trainer.cpp says so by name when it differs).
  const std::string blas = BlasCoreName(), library = BlasLibraryName();
  Log("attempt " + std::to_string(attempt_) + " started on worker " + cfg_.id +
      (resume ? ", resuming from step " + std::to_string(resume) : "") + " (" + std::to_string(total_) +
      " steps in all; BLAS " + (library.empty() ? "unnamed" : library) +
      (blas.empty() ? "" : ", " + blas + " kernels") + ")");
  Json eval_result;
  // An evaluation or a batch: a result, no training.
  const bool eval = kind == TaskKind::kEval && samplers, batch = kind == TaskKind::kBatch && samplers;
  Status s = TryTask([&] {
    if (eval || batch) {
      eval_result = batch ? RunBatchTask(*samplers) : RunEval(*samplers);
      return;
    }
    Fetch();
    // A resumed run's baseline is in the metrics it continues.
    if (std::ifstream in(run_ / "metrics.jsonl"); in) {
      for (std::string l; std::getline(in, l);) {
        Json j = Json::parse(l, nullptr, /*allow_exceptions=*/false);
        if (j.is_object() && j.value("type", "") == "eval" && j.value("step", int64_t{-1}) == 0)
          baseline_ = j;
      }
    }
    Json rj = task_.value("recipe", Json::object());
    // The base model's folder here: the control plane's, or the copy from the store.
    rj["model"] = models_.Dir(task_, [this](const std::string& line) { Log(line); }).string();
    rj["train_file"] = (run_ / "train.jsonl").string();
    if (fs::exists(run_ / "valid.jsonl")) rj["valid_file"] = (run_ / "valid.jsonl").string();
    Recipe recipe = Recipe::Parse(rj, run_, "job recipe");
    // The base model first, on its own clock: from the cache when warm.
    BaseModelCache& cache = models_.cache();
    const int64_t loads_before = cache.loads();
    auto t_load = Clock::now();
    const torch::Device device = ResolveDevice(recipe.device);
    cache.Get(ResolveModelPath(recipe.model), device, FrozenBaseDtype(recipe, device));
    Log(cache.loads() > loads_before
            ? "loaded base model " + task_.value("model_name", "") + " in " +
                  std::to_string(SecondsSince(t_load)).substr(0, 4) + " s"
            : "base model " + task_.value("model_name", "") + " already loaded (warm worker, no reload)");
    // One job on many workers: join the others (after the loads, so the
    // member timeout counts only the wait for them).
    std::unique_ptr<Gang> gang;
    if (task_.contains("member")) {
      gang = JoinGang(
          task_["member"], store_, cp_, Body(Json::object()), GangHost(cfg_.url),
          [this] { return lost_.load(); }, device.is_cuda());
      rank_ = gang->rank;
      Log("rank " + std::to_string(gang->rank) + " of " + std::to_string(gang->size) + " on worker " +
          cfg_.id +
          (gang->communication == "c10d"
               ? ": " + std::to_string(gang->size) + " workers connected through c10d Gloo (" +
                     gang->address + ") in " + std::to_string(gang->connect_s).substr(0, 4) + " s"
               : ": gradients through the store channel " + gang->channel));
    }
    TrainOptions opt;
    if (gang) opt.data_parallel = gang->Options();
    opt.resume = resume > 0;
    opt.models = &cache;
    // The base model by its catalog name (portable: an adapter's
    // adapter_config.json names it so), else as the task gives it.
    opt.base_model_name = task_.value("model_name", "");
    if (opt.base_model_name.empty() && !task_.value("model_store", "").empty()) {
      opt.base_model_name = task_.at("model").get<std::string>();
    }
    opt.should_stop = [this] { return cancel_ || lost_ || g_term.load() != 0; };
    bool first = true;
    opt.on_metrics = [&](const Json& line) {
      Json data = line;
      if (total_) data["total_steps"] = total_;
      data["unix_ms"] = std::chrono::duration_cast<std::chrono::milliseconds>(
                            std::chrono::system_clock::now().time_since_epoch())
                            .count();
      char buf[160];
      if (line.value("type", "") == "train") {
        last_train_ = line;
        step_ = line.value("step", int64_t{0});
        share_.Add(line);
        if (gang && rank_ > 0) return;  // rank 0 reports the gang's steps
        std::snprintf(buf, sizeof buf, "Step %lld/%lld: training loss=%.4f",
                      static_cast<long long>(step_.load()), static_cast<long long>(total_),
                      line.value("train_loss", 0.0));
        if (gang) {
          const size_t n = std::strlen(buf);
          std::snprintf(buf + n, sizeof buf - n, ", exchange %.1f ms", line.value("exchange_s", 0.0) * 1000);
        }
      } else {
        last_eval_ = line;
        if (line.value("step", int64_t{-1}) == 0) baseline_ = line;
        std::snprintf(buf, sizeof buf, "Step %lld: eval loss=%.4f, token accuracy=%.4f",
                      static_cast<long long>(line.value("step", int64_t{0})), line.value("eval_loss", 0.0),
                      line.value("eval_token_acc", 0.0));
      }
      Metrics(buf, data);
      // The first step goes out at once (a client is waiting to see the job
      // move); after that, batches every 0.5 s.
      if (std::exchange(first, false) ||
          std::chrono::duration<double>(Clock::now() - last_flush_).count() > 0.5) {
        Flush(false);
      }
    };
    opt.on_checkpoint = [this](int64_t step, const fs::path& dir) {
      if (!lost_) Upload(step, dir);
    };
    result = Train(recipe, run_, opt);
    if (gang) {
      Log("rank " + std::to_string(rank_) + " of " + std::to_string(gang->size) + " on worker " + cfg_.id +
          ": " + share_.Describe());
      gang->Cleanup();
    }
    if (result.interrupted) {
      outcome = result.signal != 0 || g_term.load() != 0 ? AttemptOutcome::kPreempted
                : cancel_                                ? AttemptOutcome::kCancelled
                                                         : AttemptOutcome::kPreempted;
      if (outcome == AttemptOutcome::kPreempted) {
        if (result.signal) g_term = result.signal;
        Log("preempted: state checkpoint at step " + std::to_string(result.step) + " written");
      } else {
        Log("stopped at step " + std::to_string(result.step) + " (cancelled)");
      }
    } else {
      Log("training finished at step " + std::to_string(result.step) + " in " +
          std::to_string(result.wall_s).substr(0, 5) + " s");
    }
  });
  if ((eval || batch) && !s.ok() && s.code() == Code::kCancelled) {
    // An evaluation stopped between batches: nothing to resume, it reruns
    // (a batch from the parts it wrote).
    outcome = g_term.load() != 0 ? AttemptOutcome::kPreempted : AttemptOutcome::kCancelled;
    const std::string what = batch ? "batch" : "evaluation";
    Log(outcome == AttemptOutcome::kPreempted ? what + " preempted" : what + " stopped (cancelled)");
    s = Status();
  }
  if (!s.ok()) {
    // Errors about the data name the user's file id, not the scratch copy.
    // Any other path in the scratch folder is named relative to it (a full
    // disk says where it was writing); the operator finds the server's
    // path in this worker's log.
    std::fprintf(stderr, "%s %s attempt %lld: %s\n", LogStamp().c_str(), job_.c_str(),
                 static_cast<long long>(attempt_), s.ToString().c_str());
    auto rename = [&](std::string text) {
      for (auto [local, id] : {std::pair<std::string, Json>{(run_ / "train.jsonl").string(),
                                                            task_.value("training_file", Json())},
                               {(run_ / "valid.jsonl").string(), task_.value("validation_file", Json())},
                               {run_.string(), Json("the worker's scratch folder for " + job_)}}) {
        if (!id.is_string()) continue;
        for (size_t p; (p = text.find(local)) != std::string::npos;)
          text.replace(p, local.size(), id.get<std::string>());
      }
      return text;
    };
    s = Status(s.code(), rename(s.message()), rename(s.param()));
    outcome = AttemptOutcome::kFailed;
    error = StatusJson(s);
    // Bad data and bad recipes fail the same way again; I/O and internal
    // errors may not. A full disk (resource_exhausted) is not retried: the
    // next attempt would meet the same disk, and the user learns at once
    // what to ask the operator for.
    retryable = s.code() == Code::kUnavailable || s.code() == Code::kInternal;
    Log("failed: " + s.ToString(), true, "error");
  }
  // The scratch copy goes before anything is reported: a disk this attempt
  // filled must not also refuse the control plane's record of it (they
  // often share a disk). Its checkpoints are in the store already.
  std::error_code ec;
  fs::remove_all(run_, ec);
  // Heartbeats go on until the finish is in: a control plane slow to take
  // it (retrying its own writes) must not see the lease lapse meanwhile and
  // call the attempt lost.
  if (!lost_) {
    Flush(true);
    finishing_ = true;
    Reply r = cp_.PostRetrying(
        "finish",
        Body({{"outcome", ToString(outcome)},
              {"error", error},
              {"retryable", retryable},
              {"step", result.step},
              {"trained_tokens", last_train_.is_object() ? last_train_.value("tokens", int64_t{0}) : 0},
              {"result",
               eval || batch
                   ? eval_result
                   : Json{{"steps", result.step},
                          {"train_loss", last_train_.is_object() ? last_train_["train_loss"] : Json()},
                          {"baseline", result.baseline ? result.baseline->ToJson() : Json()},
                          {"final", result.final_eval ? result.final_eval->ToJson() : Json()},
                          {"timing", Timing(result)}}}}));
    if (r.status != 200)
      std::fprintf(stderr, "%s %s: finish not accepted: %s\n", LogStamp().c_str(), job_.c_str(),
                   r.error.c_str());
  }
  done_ = true;
  hb_cv_.notify_all();
  hb.join();
}

Json TaskRun::RunBatchTask(Samplers& samplers) {
  BatchHooks hooks;
  hooks.should_stop = [this] { return cancel_ || lost_ || g_term.load() != 0; };
  hooks.log = [this](const std::string& line) { Log(line); };
  hooks.progress = [this](const Json& p) {
    step_ = p.value("step", int64_t{0});
    char buf[160];
    const Json& c = p["request_counts"];
    std::snprintf(buf, sizeof buf, "%s: %lld of %lld lines answered (%lld completed, %lld failed)",
                  p.value("finalizing", false) ? "Finalizing" : "In progress",
                  static_cast<long long>(step_.load()), static_cast<long long>(c.value("total", int64_t{0})),
                  static_cast<long long>(c.value("completed", int64_t{0})),
                  static_cast<long long>(c.value("failed", int64_t{0})));
    Metrics(buf, p);
    Flush(false);
  };
  return RunBatch(task_, store_, samplers, hooks);
}

Json TaskRun::RunEval(Samplers& samplers) {
  fs::create_directories(run_);
  const fs::path data = run_ / "eval.jsonl";
  if (Status s = store_.GetToFile(task_.at("eval_key").get<std::string>(), data); !s.ok()) throw Error(s);
  auto t0 = Clock::now();
  auto [model, tok] = samplers.Model(task_);
  Log("loaded " + task_.value("model_name", std::string("the model")) + " in " +
      std::to_string(SecondsSince(t0)).substr(0, 4) + " s");
  Dataset ds;
  try {
    ds = LoadSupervised(data, *tok, DataOptions{task_.value("max_seq_len", int64_t{512}), true, "auto"});
  } catch (const Error& e) {  // name the user's file, not the scratch copy
    std::string msg = e.status().message(), param = e.status().param();
    const std::string local = data.string(), id = task_.value("eval_file", "");
    for (std::string* t : {&msg, &param})
      for (size_t p; (p = t->find(local)) != std::string::npos;) t->replace(p, local.size(), id);
    throw Error(e.status().code(), msg, param);
  }
  EvalOptions eo;
  eo.batch_size = task_.value("batch_size", int64_t{8});
  eo.should_stop = [this] { return cancel_ || lost_ || g_term.load() != 0; };
  t0 = Clock::now();
  EvalResult r = Evaluate(*model, *tok, ds, eo);
  Json metrics = r.ToJson();
  metrics["examples"] = r.examples;
  metrics["loss_tokens"] = r.loss_tokens;
  metrics["labels"] = r.labels;
  int64_t tokens = 0;  // every token fed through the model (what serverless scope bills)
  for (const Example& ex : ds.examples) tokens += static_cast<int64_t>(ex.ids.size());
  metrics["tokens"] = tokens;
  char buf[200];
  std::snprintf(buf, sizeof buf, "evaluated %lld examples in %.2f s: loss=%.4f, token accuracy=%.4f",
                static_cast<long long>(r.examples), SecondsSince(t0), r.loss, r.token_acc);
  Log(buf);
  return {{"metrics", metrics}, {"dataset_sha256", ds.sha256}};
}

}  // namespace

// When this process started, unix ms: /proc/self/stat's start time (clock
// ticks after boot) plus the boot time from /proc/stat; now when unreadable.
static int64_t ProcessStartMs() {
  const int64_t now = std::chrono::duration_cast<std::chrono::milliseconds>(
                          std::chrono::system_clock::now().time_since_epoch())
                          .count();
  std::ifstream stat("/proc/self/stat"), sys("/proc/stat");
  std::string line;
  if (!std::getline(stat, line)) return now;
  const size_t paren = line.rfind(')');
  if (paren == std::string::npos) return now;
  std::istringstream rest(line.substr(paren + 2));
  std::string field;
  long long ticks = -1;
  for (int i = 3; i <= 22 && rest >> field; ++i) {
    if (i == 22) ticks = std::atoll(field.c_str());
  }
  long long btime = -1;
  while (std::getline(sys, line)) {
    if (line.rfind("btime ", 0) == 0) btime = std::atoll(line.c_str() + 6);
  }
  const long hz = ::sysconf(_SC_CLK_TCK);
  if (ticks < 0 || btime <= 0 || hz <= 0) return now;
  const int64_t started = btime * 1000 + ticks * 1000 / hz;
  return started > now || started < now - 3'600'000 ? now : started;
}

int RunWorker(const WorkerConfig& cfg) {
  const int64_t started_ms = ProcessStartMs();
  if (cfg.url.empty() || cfg.id.empty() || cfg.token.empty() || cfg.dir.empty()) {
    std::fprintf(
        stderr,
        "burst worker: BURST_URL, BURST_WORKER_ID, BURST_WORKER_TOKEN and BURST_WORKER_DIR must be set "
        "(workers are started by `burst serve`)\n");
    return 2;
  }
  struct sigaction sa {};
  sa.sa_handler = OnTerm;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGTERM, &sa, nullptr);
  sigaction(SIGINT, &sa, nullptr);
  fs::create_directories(cfg.dir);
  // Its device, as the executor started it: a GPU type (its GPUs are the
  // ones CUDA_VISIBLE_DEVICES shows it), or a CPU slot. A GPU worker on a
  // machine where libtorch sees no CUDA device leaves before registering,
  // so the control plane counts a failed start, not a slow CPU worker.
  const std::string& device_type = cfg.device;
  if (device_type != "cpu" && !torch::cuda::is_available()) {
    std::fprintf(
        stderr,
        "burst worker %s: started for %s GPUs, but libtorch sees no CUDA device (CUDA_VISIBLE_DEVICES=%s, "
        "a CPU-only libtorch?)\n",
        cfg.id.c_str(), device_type.c_str(),
        std::getenv("CUDA_VISIBLE_DEVICES") ? std::getenv("CUDA_VISIBLE_DEVICES") : "unset");
    return 1;
  }
  const torch::Device device =
      device_type == "cpu" ? torch::Device(torch::kCPU) : torch::Device(torch::kCUDA, 0);
  ControlPlane cp(cfg.url, cfg.token);
  // What this worker computes with (as a state checkpoint records it): the
  // control plane gives a resumed job to a worker with its checkpoint's.
  const std::string blas = BlasCoreName(), blas_library = BlasLibraryName();
  Reply reg = cp.PostRetrying("register",
                              {{"pid", static_cast<int64_t>(::getpid())},
                               {"started_ms", started_ms},
                               {"blas", blas},
                               {"blas_library", blas_library},
                               {"device", device_type}},
                              60);
  if (reg.status != 200) {
    std::fprintf(stderr, "burst worker %s: cannot register: %s\n", cfg.id.c_str(), reg.error.c_str());
    return 1;
  }
  const Json& conf = reg.body;
  const double window = conf.value("scaledown_window_s", 60.0);
  const double heartbeat = conf.value("heartbeat_s", 3.0);
  auto store = OpenObjectStore(conf.value("store", ""));
  if (!store.ok()) {
    std::fprintf(stderr, "burst worker %s: %s\n", cfg.id.c_str(), store.status().ToString().c_str());
    cp.Post("exit", {{"reason", store.status().message()}});
    return 1;
  }
  std::fprintf(stderr, "%s worker %s registered (pid %d, %s, scaledown window %.0f s, BLAS %s, kernels %s)\n",
               LogStamp().c_str(), cfg.id.c_str(), static_cast<int>(::getpid()),
               device_type == "cpu" ? "CPU slot" : (device_type + " GPU").c_str(), window,
               blas_library.empty() ? "unnamed" : blas_library.c_str(),
               blas.empty() ? "not OpenBLAS's" : blas.c_str());
  // Base models fetched from the store go to a cache the node's workers
  // share (beside their scratch folders unless BURST_MODEL_CACHE says).
  const char* model_cache = std::getenv("BURST_MODEL_CACHE");
  BaseModels models(*store.value(),
                    model_cache != nullptr && *model_cache != '\0'
                        ? fs::path(model_cache)
                        : fs::absolute(cfg.dir).parent_path() / "model-cache",
                    device);
  Samplers samplers(*store.value(), models, fs::path(cfg.dir) / "samplers");
  LoopRuns loops(*store.value(), models, fs::path(cfg.dir) / "loops");
  SetCpuThreads(conf.value("threads", 1));
  auto idle_since = Clock::now();
  std::string reason = "scaledown window passed";
  while (g_term.load() == 0) {
    const double left = window - SecondsSince(idle_since);
    if (left <= 0) break;
    Json ask = {{"model", models.Loaded()},
                {"checkpoints", samplers.Loaded()},
                {"loops", loops.HeldRuns()},
                {"wait_ms", static_cast<int64_t>(std::min(1.0, left) * 1000) + 1}};
    Reply r = cp.Post("lease", ask);
    if (r.status == 204) continue;
    if (r.status == 0) {  // the control plane is away (restarting?): wait and ask again
      std::this_thread::sleep_for(std::chrono::milliseconds(500));
      continue;
    }
    if (r.status == 401) {
      reason = "the control plane no longer knows this worker";
      break;
    }
    if (r.status != 200) {
      std::fprintf(stderr, "%s lease failed: %s\n", LogStamp().c_str(), r.error.c_str());
      std::this_thread::sleep_for(std::chrono::milliseconds(500));
      continue;
    }
    if (r.body.value("action", "") == "exit") {
      reason = "asked to exit";
      break;
    }
    if (r.body.value("action", "") == "drop") {  // runs that are over: no idle time reset
      loops.Drop(r.body.value("loops", Json::array()));
      continue;
    }
    if (r.body.value("action", "") == "hold") {  // a deployment's replica: stay until told
      idle_since = Clock::now();
      continue;
    }
    const Json& task = r.body.at("task");
    // The task's kind, read once here; one this worker does not know (a
    // newer control plane's) is not run as anything else.
    auto kind = FromString<TaskKind>(task.value("kind", std::string(ToString(TaskKind::kTrain))));
    if (!kind.ok()) {
      std::fprintf(stderr, "%s worker %s: task not run: %s\n", LogStamp().c_str(), cfg.id.c_str(),
                   kind.status().ToString().c_str());
      idle_since = Clock::now();
      continue;
    }
    if (kind.value() == TaskKind::kWarm) {
      const auto t0 = Clock::now();
      Status s = Try([&] { samplers.Warm(task); });
      std::fprintf(stderr, "%s replica of %s: checkpoint loaded in %.0f ms%s\n", LogStamp().c_str(),
                   task.value("deployment", "").c_str(), SecondsSince(t0) * 1000.0,
                   s.ok() ? "" : (": " + s.ToString()).c_str());
      idle_since = Clock::now();
      continue;
    }
    // A loop's sample requests decode in a batch, as sampling calls do (more may join it).
    const bool loop = kind.value() == TaskKind::kLoop;
    const bool loop_sample = loop && task.value("op", Json::object()).value("type", "") == "sample";
    if (loop && !loop_sample) {
      RunLoopCall(cp, task, loops);
      idle_since = Clock::now();
      continue;
    }
    if (kind.value() == TaskKind::kSample || loop_sample) {
      RunSampleCalls(cp, cfg, task, samplers);
      idle_since = Clock::now();
      continue;
    }
    TaskRun run(cfg, task, *store.value(), models, heartbeat);
    run.Run(kind.value(), &samplers);
    idle_since = Clock::now();
  }
  if (g_term.load() != 0) reason = "SIGTERM";
  loops.Park(cp);  // idle or preempted: the runs it holds go to the store
  cp.Post("exit", {{"reason", reason}});
  std::fprintf(stderr, "%s worker %s exiting: %s\n", LogStamp().c_str(), cfg.id.c_str(), reason.c_str());
  return 0;
}

}  // namespace burst
