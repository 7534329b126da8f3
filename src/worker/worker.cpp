#include "worker/worker.h"

#include <httplib.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <functional>
#include <list>
#include <mutex>
#include <sstream>
#include <thread>

#include "core/fs.h"
#include "core/json.h"
#include "store/keys.h"
#include "store/object_store.h"
#include "model/cpu_threads.h"
#include "model/hf_io.h"
#include "model/sampler.h"
#include "train/base_model_cache.h"
#include "train/chat_template.h"
#include "train/checkpoint.h"
#include "train/data.h"
#include "train/eval.h"
#include "train/recipe.h"
#include "train/trainer.h"

namespace burst {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

std::atomic<int> g_term{0};
void OnTerm(int sig) { g_term.store(sig); }

double Since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

std::string Stamp() {
  std::time_t t = std::time(nullptr);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M:%S", std::gmtime(&t));
  return buf;
}

// Runs a task's work, turning any exception into a Status. A full disk is
// resource_exhausted naming the path whoever hit it: Burst's own writers say
// so already; std::filesystem (folders, copies) is mapped here.
Status TryTask(const std::function<void()>& fn) {
  try {
    fn();
    return Status();
  } catch (const fs::filesystem_error& e) {
    if (IsDiskFull(e.code().value())) return IoStatus(e.code().value(), "cannot write", e.path1(), Code::kInternal);
    return CurrentExceptionToStatus();
  } catch (...) {
    return CurrentExceptionToStatus();
  }
}

// ----------------------------------------------------------------------------
// the control plane, over HTTP

struct Reply {
  int status = 0;  // 0: no answer (connection error)
  Json body;
  std::string error;
};

// The control plane, as one or more URLs (BURST_URL, comma-separated: every
// control plane sharing the database). Requests go to the one that answered
// last; a connection error or a standby's 503 moves on to the next, so the
// worker follows the leader after a failover.
class ControlPlane {
 public:
  ControlPlane(const std::string& urls, const std::string& token) {
    size_t pos = 0;
    while (pos <= urls.size()) {
      size_t comma = urls.find(',', pos);
      if (comma == std::string::npos) comma = urls.size();
      std::string u = urls.substr(pos, comma - pos);
      if (!u.empty()) urls_.push_back(u);
      pos = comma + 1;
    }
    if (urls_.empty()) urls_.push_back(urls);
    for (const std::string& u : urls_) {
      auto c = std::make_unique<httplib::Client>(u);
      c->set_connection_timeout(5, 0);
      c->set_tcp_nodelay(true);
      c->set_read_timeout(60, 0);
      c->set_write_timeout(60, 0);
      http_.push_back(std::move(c));
    }
    headers_ = {{"Authorization", "Bearer " + token}};
  }

  Reply Post(const std::string& what, const Json& body) {
    std::lock_guard<std::mutex> lock(mu_);
    const std::string& url = urls_[cur_];
    auto r = http_[cur_]->Post("/internal/v1/" + what, headers_, body.dump(), "application/json");
    Reply out;
    if (!r) {
      out.error = "cannot reach " + url + ": " + httplib::to_string(r.error());
      cur_ = (cur_ + 1) % urls_.size();
      return out;
    }
    out.status = r->status;
    out.body = Json::parse(r->body, nullptr, /*allow_exceptions=*/false);
    if (out.status >= 400) {
      out.error = out.body.is_object() && out.body.contains("error") ? out.body["error"].value("message", "")
                                                                      : "HTTP " + std::to_string(out.status);
      const bool standby = out.status == 503 && out.body.is_object() && out.body.contains("error") &&
                           out.body["error"].is_object() && out.body["error"].value("code", "") == "standby";
      if (standby) cur_ = (cur_ + 1) % urls_.size();
    }
    return out;
  }

  // Retries connection errors and 5xx with backoff for up to `patience_s`;
  // returns the last reply.
  Reply PostRetrying(const std::string& what, const Json& body, double patience_s = 600) {
    auto start = Clock::now();
    double wait = 0.2;
    for (;;) {
      Reply r = Post(what, body);
      if ((r.status != 0 && r.status < 500) || Since(start) > patience_s) return r;
      std::this_thread::sleep_for(std::chrono::duration<double>(wait));
      wait = std::min(wait * 2, 5.0);
    }
  }

 private:
  std::mutex mu_;
  std::vector<std::string> urls_;
  std::vector<std::unique_ptr<httplib::Client>> http_;
  size_t cur_ = 0;  // GUARDED_BY(mu_)
  httplib::Headers headers_;
};

// ----------------------------------------------------------------------------
// one task

class Samplers;

class TaskRun {
 public:
  TaskRun(const WorkerConfig& cfg, const Json& task, ObjectStore& store, BaseModelCache& cache, double heartbeat_s)
      : cfg_(cfg),
        task_(task),
        store_(store),
        cache_(cache),
        heartbeat_s_(heartbeat_s),
        cp_(cfg.url, cfg.token),
        hb_cp_(cfg.url, cfg.token) {
    job_ = task.at("job").get<std::string>();
    attempt_ = task.at("attempt").get<int64_t>();
    prefix_ = task.at("store_prefix").get<std::string>();  // the job's folder (store/keys.h)
    total_ = task.value("total_steps", int64_t{0});
  }

  // A training task, or with `samplers` an evaluation task (kind "eval").
  void Run(Samplers* samplers = nullptr);

 private:
  // Loads the eval file and the model (a checkpoint's adapter on the warm
  // base model) and evaluates; the finish result carries the record.
  Json RunEval(Samplers& samplers);
  void Log(const std::string& line, bool event = true, const std::string& level = "info");
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
  BaseModelCache& cache_;
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
};

void TaskRun::Log(const std::string& line, bool event, const std::string& level) {
  std::fprintf(stderr, "%s %s attempt %lld: %s\n", Stamp().c_str(), job_.c_str(), static_cast<long long>(attempt_),
               line.c_str());
  std::lock_guard<std::mutex> lock(mu_);
  logs_.push_back(Stamp() + " " + line);
  if (event) events_.push_back({{"level", level}, {"type", "message"}, {"message", line}});
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
      if (finishing_) break;  // the finish was taken meanwhile: that ended the lease
      lost_ = true;
      std::fprintf(stderr, "%s %s: lease lost (%s); dropping the task\n", Stamp().c_str(), job_.c_str(),
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
  Log("fetched state checkpoint step " + std::to_string(resume) + " (" + std::to_string(objects.value().size()) +
      " files) from the store");
}

// Each folder's files first, its manifest last: a reader that finds the
// manifest finds the files (docs/design.md, invariant 2).
void TaskRun::Upload(int64_t step, const fs::path& step_dir) {
  auto t0 = Clock::now();
  const std::string base = CheckpointPrefix(prefix_, step);
  // The run folder's halves and their places in the store.
  const std::pair<const char*, std::string> parts[] = {{"sampler", SamplerPrefix(base)}, {"state", StatePrefix(base)}};
  for (const auto& [part, prefix] : parts) {
    fs::path dir = step_dir / part;
    std::vector<fs::path> files;
    for (const auto& e : fs::recursive_directory_iterator(dir))
      if (e.is_regular_file() && e.path().filename() != "manifest.json") files.push_back(e.path());
    files.push_back(dir / "manifest.json");
    for (const fs::path& f : files) {
      const std::string key = prefix + fs::relative(f, dir).string();
      if (Status s = store_.PutFile(key, f); !s.ok()) throw Error(s);
    }
  }
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
  Log("checkpoint step " + std::to_string(step) + " uploaded in " + std::to_string(Since(t0)).substr(0, 4) + " s",
      false);
  Flush(true);
  Reply r = cp_.PostRetrying("checkpoint", Body({{"step", step}, {"metrics", metrics}}));
  if (r.status == 409) lost_ = true;
}

void TaskRun::Run(Samplers* samplers) {
  run_ = fs::path(cfg_.dir) / job_;
  fs::remove_all(run_);
  std::thread hb([this] { Heartbeats(); });
  std::string outcome = "completed";
  Json error;
  bool retryable = false;
  TrainResult result;
  const int64_t resume = task_.value("resume_step", int64_t{0});
  Log("attempt " + std::to_string(attempt_) + " started on worker " + cfg_.id +
      (resume ? ", resuming from step " + std::to_string(resume) : "") + " (" + std::to_string(total_) +
      " steps in all)");
  Json eval_result;
  const bool eval = task_.value("kind", "") == "eval" && samplers;
  Status s = TryTask([&] {
    if (eval) {
      eval_result = RunEval(*samplers);
      return;
    }
    Fetch();
    // A resumed run's baseline is in the metrics it continues.
    if (std::ifstream in(run_ / "metrics.jsonl"); in) {
      for (std::string l; std::getline(in, l);) {
        Json j = Json::parse(l, nullptr, /*allow_exceptions=*/false);
        if (j.is_object() && j.value("type", "") == "eval" && j.value("step", int64_t{-1}) == 0) baseline_ = j;
      }
    }
    Json rj = task_.value("recipe", Json::object());
    rj["model"] = task_.at("model");
    rj["train_file"] = (run_ / "train.jsonl").string();
    if (fs::exists(run_ / "valid.jsonl")) rj["valid_file"] = (run_ / "valid.jsonl").string();
    Recipe recipe = Recipe::Parse(rj, run_, "job recipe");
    // The base model first, on its own clock: from the cache when warm.
    const int64_t loads_before = cache_.loads();
    auto t_load = Clock::now();
    cache_.Get(ResolveModelPath(recipe.model), ResolveDevice(recipe.device));
    Log(cache_.loads() > loads_before
            ? "loaded base model " + task_.value("model_name", "") + " in " +
                  std::to_string(Since(t_load)).substr(0, 4) + " s"
            : "base model " + task_.value("model_name", "") + " already loaded (warm worker, no reload)");
    TrainOptions opt;
    opt.resume = resume > 0;
    opt.models = &cache_;
    opt.should_stop = [this] { return cancel_ || lost_ || g_term.load() != 0; };
    bool first = true;
    opt.on_metrics = [&](const Json& line) {
      Json data = line;
      if (total_) data["total_steps"] = total_;
      data["unix_ms"] = std::chrono::duration_cast<std::chrono::milliseconds>(
                            std::chrono::system_clock::now().time_since_epoch())
                            .count();
      std::string msg;
      char buf[160];
      if (line.value("type", "") == "train") {
        last_train_ = line;
        step_ = line.value("step", int64_t{0});
        std::snprintf(buf, sizeof buf, "Step %lld/%lld: training loss=%.4f", static_cast<long long>(step_.load()),
                      static_cast<long long>(total_), line.value("train_loss", 0.0));
      } else {
        last_eval_ = line;
        if (line.value("step", int64_t{-1}) == 0) baseline_ = line;
        std::snprintf(buf, sizeof buf, "Step %lld: eval loss=%.4f, token accuracy=%.4f",
                      static_cast<long long>(line.value("step", int64_t{0})), line.value("eval_loss", 0.0),
                      line.value("eval_token_acc", 0.0));
      }
      msg = buf;
      {
        std::lock_guard<std::mutex> lock(mu_);
        events_.push_back({{"level", "info"}, {"type", "metrics"}, {"message", msg}, {"data", data}});
        logs_.push_back(Stamp() + " " + msg);
      }
      // The first step goes out at once (a client is waiting to see the job
      // move); after that, batches every 0.5 s.
      if (std::exchange(first, false) || std::chrono::duration<double>(Clock::now() - last_flush_).count() > 0.5) {
        Flush(false);
      }
    };
    opt.on_checkpoint = [this](int64_t step, const fs::path& dir) {
      if (!lost_) Upload(step, dir);
    };
    result = Train(recipe, run_, opt);
    if (result.interrupted) {
      outcome = result.signal != 0 || g_term.load() != 0 ? "preempted" : cancel_ ? "cancelled" : "preempted";
      if (outcome == "preempted") {
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
  if (eval && !s.ok() && s.code() == Code::kCancelled) {
    // An evaluation stopped between batches: nothing to resume, it reruns.
    outcome = g_term.load() != 0 ? "preempted" : "cancelled";
    Log(outcome == "preempted" ? "evaluation preempted" : "evaluation stopped (cancelled)");
    s = Status();
  }
  if (!s.ok()) {
    // Errors about the data name the user's file id, not the scratch copy.
    // Any other path in the scratch folder is named relative to it (a full
    // disk says where it was writing); the operator finds the server's
    // path in this worker's log.
    std::fprintf(stderr, "%s %s attempt %lld: %s\n", Stamp().c_str(), job_.c_str(), static_cast<long long>(attempt_),
                 s.ToString().c_str());
    auto rename = [&](std::string text) {
      for (auto [local, id] : {std::pair<std::string, Json>{(run_ / "train.jsonl").string(), task_.value("training_file", Json())},
                               {(run_ / "valid.jsonl").string(), task_.value("validation_file", Json())},
                               {run_.string(), Json("the worker's scratch folder for " + job_)}}) {
        if (!id.is_string()) continue;
        for (size_t p; (p = text.find(local)) != std::string::npos;) text.replace(p, local.size(), id.get<std::string>());
      }
      return text;
    };
    s = Status(s.code(), rename(s.message()), rename(s.param()));
    outcome = "failed";
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
    Reply r = cp_.PostRetrying("finish", Body({{"outcome", outcome},
                                               {"error", error},
                                               {"retryable", retryable},
                                               {"step", result.step},
                                               {"trained_tokens", last_train_.is_object() ? last_train_.value("tokens", int64_t{0}) : 0},
                                               {"result", eval ? eval_result : Json{{"steps", result.step},
                                                           {"train_loss", last_train_.is_object() ? last_train_["train_loss"] : Json()},
                                                           {"baseline", result.baseline ? result.baseline->ToJson() : Json()},
                                                           {"final", result.final_eval ? result.final_eval->ToJson() : Json()}}}}));
    if (r.status != 200) std::fprintf(stderr, "%s %s: finish not accepted: %s\n", Stamp().c_str(), job_.c_str(), r.error.c_str());
  }
  done_ = true;
  hb_cv_.notify_all();
  hb.join();
}

// ----------------------------------------------------------------------------
// sampling calls

// Checkpoints a worker has sampled from, kept loaded: the base model stays in
// the BaseModelCache; a LoRA checkpoint is the base's tensors plus its
// adapter, swapped in per call. A few are kept, least recently used first out.
class Samplers {
 public:
  Samplers(ObjectStore& store, BaseModelCache& cache, fs::path dir) : store_(store), cache_(cache), dir_(std::move(dir)) {}

  // `emit` receives streamed pieces ({index, delta, token, logprob,
  // finish_reason}) when the task asks for a stream.
  // The model a task names ({model, checkpoint_prefix, full}) and its
  // tokenizer; valid until the next call.
  std::pair<const LlamaModel*, const Tokenizer*> Model(const Json& task) {
    auto base = cache_.Get(fs::path(task.at("model").get<std::string>()), torch::kCPU);
    const std::string prefix = task.value("checkpoint_prefix", "");
    const LlamaModel* m = prefix.empty() ? &base->model : &Checkpoint(prefix, task.value("full", false), *base);
    return {m, base->tokenizer.get()};
  }

  // Loads the task's base model and checkpoint (a deployment's replica does
  // this before its first call).
  void Warm(const Json& task) {
    auto base = cache_.Get(fs::path(task.at("model").get<std::string>()), torch::kCPU);
    const std::string prefix = task.value("checkpoint_prefix", "");
    if (!prefix.empty()) Checkpoint(prefix, task.value("full", false), *base);
  }

  // The checkpoint prefixes held loaded, most recent first (the lease says
  // them, so a deployment knows which replicas are ready).
  Json Loaded() const {
    Json out = Json::array();
    for (const auto& entry : loaded_) out.push_back(entry.first);
    return out;
  }

  // `should_stop` is checked before each token (the call was cancelled).
  Json Run(const Json& task, const std::function<void(Json)>& emit, const std::function<bool()>& should_stop) {
    const auto t0 = Clock::now();
    const int64_t loads_before = cache_.loads(), fetches_before = fetches_;
    const fs::path base_dir = task.at("model").get<std::string>();
    auto base = cache_.Get(base_dir, torch::kCPU);
    const std::string prefix = task.value("checkpoint_prefix", "");
    const LlamaModel& model = prefix.empty() ? base->model : Checkpoint(prefix, task.value("full", false), *base);
    const double load_ms = Since(t0) * 1000.0;
    // Whether this call had to load the base model or the checkpoint.
    const bool loaded = cache_.loads() > loads_before || fetches_ > fetches_before;
    const Tokenizer& tok = *base->tokenizer;
    const Json& req = task.at("request");
    SampleParams p;
    p.max_tokens = req.value("max_tokens", int64_t{16});
    p.temperature = req.value("temperature", 1.0);
    p.top_p = req.value("top_p", 1.0);
    p.seed = req.value("seed", uint64_t{0});
    p.n = req.value("n", int64_t{1});
    for (const Json& s : req.value("stop", Json::array())) p.stop.push_back(s.get<std::string>());
    std::vector<int> ids;
    if (req.contains("messages")) {
      std::vector<ChatMessage> msgs;
      for (const Json& m : req["messages"]) msgs.push_back({m.at("role").get<std::string>(), m.at("content").get<std::string>()});
      ChatTemplate t = ResolveChatTemplate("auto", tok);
      ids = RenderChat(msgs, t, tok, true).ids;
      p.extra_stop_ids.push_back(EndOfTurnId(t, tok));
    } else {
      if (tok.bos_id) ids.push_back(*tok.bos_id);
      auto enc = tok.Encode(req.value("prompt", std::string()));
      ids.insert(ids.end(), enc.begin(), enc.end());
    }
    p.should_stop = should_stop;
    if (task.value("stream", false)) {
      p.on_delta = [&](int64_t index, const std::string& delta, int token, float logprob, const std::string& reason) {
        emit({{"index", index},
              {"delta", delta},
              {"token", token >= 0 ? Json(tok.Decode({token})) : Json()},
              {"logprob", token >= 0 ? Json(logprob) : Json()},
              {"finish_reason", reason.empty() ? Json() : Json(reason)}});
      };
    }
    auto samples = Sample(model, tok, ids, p);
    Json out = {{"prompt_tokens", ids.size()}, {"load_ms", load_ms}, {"loaded", loaded}, {"samples", Json::array()}};
    for (const auto& s : samples) {
      Json pieces = Json::array();
      for (int id : s.token_ids) pieces.push_back(tok.Decode({id}));
      out["samples"].push_back({{"text", s.text},
                                {"token_ids", s.token_ids},
                                {"tokens", pieces},
                                {"logprobs", s.logprobs},
                                {"finish_reason", s.finish_reason}});
    }
    return out;
  }

 private:
  const LlamaModel& Checkpoint(const std::string& prefix, bool full, const BaseModel& base) {
    for (auto it = loaded_.begin(); it != loaded_.end(); ++it) {
      if (it->first != prefix) continue;
      loaded_.splice(loaded_.begin(), loaded_, it);  // most recent first
      return loaded_.front().second;
    }
    // Fetch the sampler folder and check it against its manifest.
    ++fetches_;
    fs::path dir = dir_ / "checkpoints" / Sha256Hex(prefix).substr(0, 16);
    fs::remove_all(dir);
    auto objects = store_.List(prefix);
    if (!objects.ok()) throw Error(objects.status());
    if (objects.value().empty()) throw Error(Code::kNotFound, "checkpoint " + prefix + " is not in the store", "model");
    for (const ObjectInfo& o : objects.value()) {
      fs::path dst = dir / o.key.substr(prefix.size());
      fs::create_directories(dst.parent_path());
      if (Status s = store_.GetToFile(o.key, dst); !s.ok()) throw Error(s);
    }
    if (Status s = VerifyManifest(dir); !s.ok()) throw Error(s);
    LlamaModel m = full ? LoadModel(dir, torch::kCPU) : base.model;  // a copy sharing the frozen base tensors
    if (!full) LoadAdapter(m, dir);
    loaded_.emplace_front(prefix, std::move(m));
    while (loaded_.size() > (full ? 1u : 4u)) loaded_.pop_back();
    return loaded_.front().second;
  }

  ObjectStore& store_;
  BaseModelCache& cache_;
  fs::path dir_;
  std::list<std::pair<std::string, LlamaModel>> loaded_;
  int64_t fetches_ = 0;  // checkpoints fetched and loaded (cache misses)
};

Json TaskRun::RunEval(Samplers& samplers) {
  fs::create_directories(run_);
  const fs::path data = run_ / "eval.jsonl";
  if (Status s = store_.GetToFile(task_.at("eval_key").get<std::string>(), data); !s.ok()) throw Error(s);
  auto t0 = Clock::now();
  auto [model, tok] = samplers.Model(task_);
  Log("loaded " + task_.value("model_name", std::string("the model")) + " in " + std::to_string(Since(t0)).substr(0, 4) + " s");
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
                static_cast<long long>(r.examples), Since(t0), r.loss, r.token_acc);
  Log(buf);
  return {{"metrics", metrics}, {"dataset_sha256", ds.sha256}};
}

// One sampling call. A streamed call sends its pieces from a thread of its
// own: batched for at most 20 ms, and at least every 250 ms while the call
// runs (an empty batch is a keep-alive), so a caller that went away is
// learnt within a quarter of a second from the answer ({"cancel": true}, or
// 409: the call is no longer this worker's) and the sampler stops before
// its next token. Then the answer: the result, or the error; a cancelled
// call answers {code: "cancelled"} with what it sampled until then, which is
// what is billed.
void RunSampleCall(ControlPlane& cp, const WorkerConfig& cfg, const Json& task, Samplers& samplers) {
  constexpr auto kBatch = std::chrono::milliseconds(20), kKeepAlive = std::chrono::milliseconds(250);
  const std::string id = task.value("id", "");
  const bool stream = task.value("stream", false);
  std::atomic<bool> cancel{false};
  std::mutex mu;
  std::condition_variable cv;
  Json pending = Json::array();
  bool finished = false;
  std::thread sender;
  if (stream) {
    sender = std::thread([&] {
      ControlPlane chunks_cp(cfg.url, cfg.token);  // one connection per thread
      std::unique_lock<std::mutex> lock(mu);
      auto last = Clock::now();
      for (;;) {
        if (!finished && pending.empty()) cv.wait_until(lock, last + kKeepAlive, [&] { return finished || !pending.empty(); });
        if (!finished && !pending.empty()) cv.wait_until(lock, last + kBatch, [&] { return finished; });
        const bool end = finished;
        Json batch = std::exchange(pending, Json::array());
        lock.unlock();
        if (!cancel) {
          Reply r = chunks_cp.Post("sample_chunks", {{"id", id}, {"chunks", batch}});
          if (r.status == 409 || r.status == 401 || (r.status == 200 && r.body.value("cancel", false))) {
            cancel = true;
          }
        }
        lock.lock();
        last = Clock::now();
        if (end) return;
      }
    });
  }
  Json result, error;
  Status s = Try([&] {
    result = samplers.Run(
        task,
        [&](Json chunk) {
          std::lock_guard<std::mutex> lock(mu);
          pending.push_back(std::move(chunk));
          cv.notify_all();
        },
        [&] { return cancel.load(); });
  });
  if (sender.joinable()) {
    {
      std::lock_guard<std::mutex> lock(mu);
      finished = true;
    }
    cv.notify_all();
    sender.join();  // its last batch goes before the answer
  }
  int64_t sampled = 0;
  bool stopped = false;
  if (result.is_object()) {
    for (const Json& smp : result.value("samples", Json::array())) {
      sampled += static_cast<int64_t>(smp.value("token_ids", Json::array()).size());
      stopped = stopped || smp.value("finish_reason", "") == "cancelled";
    }
  }
  if (!s.ok()) {
    error = StatusJson(s);
    std::fprintf(stderr, "%s sampling %s failed: %s\n", Stamp().c_str(), id.c_str(), s.ToString().c_str());
  } else if (stopped) {
    error = StatusJson(Status(Code::kCancelled, "the caller went away; sampling stopped after " +
                                                    std::to_string(sampled) + " tokens"));
    std::fprintf(stderr, "%s sampling %s cancelled after %lld tokens\n", Stamp().c_str(), id.c_str(),
                 static_cast<long long>(sampled));
  }
  Reply r = cp.PostRetrying("sample_result", {{"id", id}, {"result", result}, {"error", error}}, 30);
  if (r.status != 200) {
    std::fprintf(stderr, "%s sampling %s: answer not accepted: %s\n", Stamp().c_str(), id.c_str(), r.error.c_str());
  }
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
    std::fprintf(stderr,
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
  ControlPlane cp(cfg.url, cfg.token);
  Reply reg = cp.PostRetrying("register", {{"pid", static_cast<int64_t>(::getpid())}, {"started_ms", started_ms}}, 60);
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
  std::fprintf(stderr, "%s worker %s registered (pid %d, scaledown window %.0f s)\n", Stamp().c_str(), cfg.id.c_str(),
               static_cast<int>(::getpid()), window);
  BaseModelCache cache;
  Samplers samplers(*store.value(), cache, fs::path(cfg.dir) / "samplers");
  SetCpuThreads(conf.value("threads", 1));
  auto idle_since = Clock::now();
  std::string reason = "scaledown window passed";
  while (g_term.load() == 0) {
    const double left = window - Since(idle_since);
    if (left <= 0) break;
    auto loaded = cache.loaded();
    Json ask = {{"model", loaded ? Json(fs::weakly_canonical(*loaded).string()) : Json()},
                {"checkpoints", samplers.Loaded()},
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
      std::fprintf(stderr, "%s lease failed: %s\n", Stamp().c_str(), r.error.c_str());
      std::this_thread::sleep_for(std::chrono::milliseconds(500));
      continue;
    }
    if (r.body.value("action", "") == "exit") {
      reason = "asked to exit";
      break;
    }
    if (r.body.value("action", "") == "hold") {  // a deployment's replica: stay until told
      idle_since = Clock::now();
      continue;
    }
    const Json& task = r.body.at("task");
    if (task.value("kind", "") == "warm") {
      const auto t0 = Clock::now();
      Status s = Try([&] { samplers.Warm(task); });
      std::fprintf(stderr, "%s replica of %s: checkpoint loaded in %.0f ms%s\n", Stamp().c_str(),
                   task.value("deployment", "").c_str(), Since(t0) * 1000.0,
                   s.ok() ? "" : (": " + s.ToString()).c_str());
      idle_since = Clock::now();
      continue;
    }
    if (task.value("kind", "") == "sample") {
      RunSampleCall(cp, cfg, task, samplers);
      idle_since = Clock::now();
      continue;
    }
    TaskRun run(cfg, task, *store.value(), cache, heartbeat);
    run.Run(&samplers);
    idle_since = Clock::now();
  }
  if (g_term.load() != 0) reason = "SIGTERM";
  cp.Post("exit", {{"reason", reason}});
  std::fprintf(stderr, "%s worker %s exiting: %s\n", Stamp().c_str(), cfg.id.c_str(), reason.c_str());
  return 0;
}

}  // namespace burst
