#include "worker/samplers.h"

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <thread>

#include "core/fs.h"
#include "model/hf_io.h"
#include "model/sampler.h"
#include "train/chat_template.h"
#include "train/checkpoint.h"

namespace burst {

namespace fs = std::filesystem;

std::pair<const LlamaModel*, const Tokenizer*> Samplers::Model(const Json& task) {
  auto base = models_.Get(task, torch::kCPU);
  const std::string prefix = task.value("checkpoint_prefix", "");
  const LlamaModel* m = prefix.empty() ? &base->model : &Checkpoint(prefix, task.value("full", false), *base);
  return {m, base->tokenizer.get()};
}

void Samplers::Warm(const Json& task) {
  auto base = models_.Get(task, torch::kCPU);
  const std::string prefix = task.value("checkpoint_prefix", "");
  if (!prefix.empty()) Checkpoint(prefix, task.value("full", false), *base);
}

Json Samplers::Loaded() const {
  Json out = Json::array();
  for (const auto& entry : loaded_) out.push_back(entry.first);
  return out;
}

Json Samplers::Run(const Json& task, const std::function<void(Json)>& emit, const std::function<bool()>& should_stop) {
  const auto t0 = std::chrono::steady_clock::now();
  const int64_t loads_before = models_.cache().loads(), fetches_before = fetches_;
  auto base = models_.Get(task, torch::kCPU);
  const std::string prefix = task.value("checkpoint_prefix", "");
  const LlamaModel& model = prefix.empty() ? base->model : Checkpoint(prefix, task.value("full", false), *base);
  const double load_ms = SecondsSince(t0) * 1000.0;
  // Whether this call had to load the base model or the checkpoint.
  const bool loaded = models_.cache().loads() > loads_before || fetches_ > fetches_before;
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

const LlamaModel& Samplers::Checkpoint(const std::string& prefix, bool full, const BaseModel& base) {
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
      auto last = std::chrono::steady_clock::now();
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
        last = std::chrono::steady_clock::now();
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
    std::fprintf(stderr, "%s sampling %s failed: %s\n", LogStamp().c_str(), id.c_str(), s.ToString().c_str());
  } else if (stopped) {
    error = StatusJson(Status(Code::kCancelled, "the caller went away; sampling stopped after " +
                                                    std::to_string(sampled) + " tokens"));
    std::fprintf(stderr, "%s sampling %s cancelled after %lld tokens\n", LogStamp().c_str(), id.c_str(),
                 static_cast<long long>(sampled));
  }
  Reply r = cp.PostRetrying("sample_result", {{"id", id}, {"result", result}, {"error", error}}, 30);
  if (r.status != 200) {
    std::fprintf(stderr, "%s sampling %s: answer not accepted: %s\n", LogStamp().c_str(), id.c_str(), r.error.c_str());
  }
}

}  // namespace burst
