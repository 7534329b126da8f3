#include "worker/sample_calls.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <map>
#include <memory>
#include <mutex>
#include <thread>

#include "model/batch_decoder.h"

namespace burst {
namespace {

using Clock = std::chrono::steady_clock;

// A streamed call's pieces on their way to the control plane (see the
// header): Emit queues, a thread posts, Close sends the rest and joins.
class CallStream {
 public:
  CallStream(const WorkerConfig& cfg, std::string id) : id_(std::move(id)) {
    sender_ = std::thread([this, url = cfg.url, token = cfg.token] { Send(url, token); });
  }
  ~CallStream() { Close(); }

  void Emit(Json chunk) {
    std::lock_guard<std::mutex> lock(mu_);
    pending_.push_back(std::move(chunk));
    cv_.notify_all();
  }
  bool cancelled() const { return cancel_.load(); }
  void Close() {
    if (!sender_.joinable()) return;
    {
      std::lock_guard<std::mutex> lock(mu_);
      finished_ = true;
    }
    cv_.notify_all();
    sender_.join();  // its last batch goes before the answer
  }

 private:
  void Send(const std::string& url, const std::string& token) {
    constexpr auto kBatch = std::chrono::milliseconds(20), kKeepAlive = std::chrono::milliseconds(250);
    ControlPlane cp(url, token);  // one connection per thread
    std::unique_lock<std::mutex> lock(mu_);
    auto last = Clock::now();
    for (;;) {
      if (!finished_ && pending_.empty()) {
        cv_.wait_until(lock, last + kKeepAlive, [&] { return finished_ || !pending_.empty(); });
      }
      if (!finished_ && !pending_.empty()) cv_.wait_until(lock, last + kBatch, [&] { return finished_; });
      const bool end = finished_;
      Json batch = std::exchange(pending_, Json::array());
      lock.unlock();
      if (!cancel_) {
        Reply r = cp.Post("sample_chunks", {{"id", id_}, {"chunks", batch}});
        if (r.status == 409 || r.status == 401 || (r.status == 200 && r.body.value("cancel", false))) cancel_ = true;
      }
      lock.lock();
      last = Clock::now();
      if (end) return;
    }
  }

  const std::string id_;
  std::atomic<bool> cancel_{false};
  std::mutex mu_;
  std::condition_variable cv_;
  Json pending_ = Json::array();  // GUARDED_BY(mu_)
  bool finished_ = false;         // GUARDED_BY(mu_)
  std::thread sender_;
};

struct Call {
  std::string id;
  PreparedSample prep;
  std::unique_ptr<CallStream> stream;  // a streamed call's
  int64_t peak = 1;                    // calls in the batch at most while it ran
  Clock::time_point added = Clock::now();
};

// Posts a call's answer: its samples, or its error (a cancelled call says
// so, with what it sampled: that is what is billed).
void Answer(ControlPlane& cp, Call& call, const Json& result, Status s) {
  if (call.stream) call.stream->Close();
  int64_t sampled = 0;
  bool stopped = false;
  if (result.is_object()) {
    for (const Json& smp : result.value("samples", Json::array())) {
      sampled += static_cast<int64_t>(smp.value("token_ids", Json::array()).size());
      stopped = stopped || smp.value("finish_reason", "") == "cancelled";
    }
  }
  Json error;
  if (!s.ok()) {
    error = StatusJson(s);
    std::fprintf(stderr, "%s sampling %s failed: %s\n", LogStamp().c_str(), call.id.c_str(), s.ToString().c_str());
  } else if (stopped) {
    error = StatusJson(Status(Code::kCancelled, "the caller went away; sampling stopped after " +
                                                    std::to_string(sampled) + " tokens"));
    std::fprintf(stderr, "%s sampling %s cancelled after %lld tokens\n", LogStamp().c_str(), call.id.c_str(),
                 static_cast<long long>(sampled));
  }
  Reply r = cp.PostRetrying("sample_result", {{"id", call.id}, {"result", result}, {"error", error}}, 30);
  if (r.status != 200) {
    std::fprintf(stderr, "%s sampling %s: answer not accepted: %s\n", LogStamp().c_str(), call.id.c_str(),
                 r.error.c_str());
  }
}

}  // namespace

void RunSampleCalls(ControlPlane& cp, const WorkerConfig& cfg, const Json& first_task, Samplers& samplers) {
  std::unique_ptr<BatchDecoder> decoder;
  const LlamaModel* model = nullptr;
  std::map<int64_t, Call> calls;  // by decoder request id
  // Prepares a call and adds it to the batch; a call that cannot be is
  // answered with why at once.
  auto add = [&](const Json& task) {
    Call call;
    call.id = task.value("id", "");
    Status s = Try([&] {
      call.prep = samplers.Prepare(task);
      if (!decoder || calls.empty()) {
        // The first call, or one handed over after the batch emptied (the
        // worker was idle then, so it may be for any weights): a decoder on
        // its model.
        model = call.prep.model;
        decoder = std::make_unique<BatchDecoder>(*model, *call.prep.tokenizer);
      } else if (call.prep.model != model) {  // the runtime joins calls on the same weights only
        throw Error(Code::kInternal, "call " + call.id + " joined a batch decoding other weights");
      }
      SampleParams p = call.prep.params;
      if (task.value("stream", false)) {
        call.stream = std::make_unique<CallStream>(cfg, call.id);
        CallStream* stream = call.stream.get();
        const Tokenizer* tok = call.prep.tokenizer;
        p.on_delta = [stream, tok](int64_t index, const std::string& delta, int token, float logprob,
                                   const std::string& reason) {
          stream->Emit({{"index", index},
                        {"delta", delta},
                        {"token", token >= 0 ? Json(tok->Decode({token})) : Json()},
                        {"logprob", token >= 0 ? Json(logprob) : Json()},
                        {"finish_reason", reason.empty() ? Json() : Json(reason)}});
        };
        p.should_stop = [stream] { return stream->cancelled(); };
      }
      const int64_t rid = decoder->Add(call.prep.ids, std::move(p));
      calls.emplace(rid, std::move(call));
    });
    if (!s.ok()) Answer(cp, call, Json(), s);
  };
  // Calls that joined the batch since the last ask.
  auto join = [&] {
    for (;;) {
      Reply r = cp.Post("sample_join", Json::object());
      if (r.status != 200) return;  // 204: none now (an error: asked again at the next step)
      add(r.body.value("task", Json::object()));
    }
  };
  add(first_task);
  // Calls that joined while the first one's weights loaded start with it
  // (one prefill for prompts sharing a prefix).
  join();
  auto asked = Clock::now();
  while (decoder && !decoder->idle()) {
    for (auto& [rid, call] : calls) call.peak = std::max(call.peak, static_cast<int64_t>(calls.size()));
    Status s = Try([&] { decoder->Step(); });
    if (!s.ok()) {  // the decoder failed: every call in it with the error
      for (auto& [rid, call] : calls) Answer(cp, call, Json(), s);
      return;
    }
    for (FinishedRequest& done : decoder->TakeFinished()) {
      auto it = calls.find(done.id);
      Call& call = it->second;
      Json result = SampleResultJson(call.prep, done);
      result["batch_peak"] = call.peak;
      // A loop request's time on the worker (loading included), as its other requests report it.
      if (call.prep.loop) {
        result["compute_ms"] = std::chrono::duration<double, std::milli>(Clock::now() - call.added).count();
      }
      Answer(cp, call, result, Status());
      calls.erase(it);
    }
    if (decoder->idle() || Clock::now() - asked >= std::chrono::milliseconds(10)) {
      join();
      asked = Clock::now();
    }
  }
}

}  // namespace burst
