#include "worker/sample_calls.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include "model/batch_decoder.h"

namespace burst {
namespace {

using Clock = std::chrono::steady_clock;

// Every streamed call's pieces on their way to the control plane (see the
// header), in one post for the whole batch: Emit queues a piece; a thread
// posts what every open call has pending, batched for up to 20 ms and at
// least every 250 ms (empty lists then: keep-alives, so that the answer
// says which calls' callers went away); Close returns once a call's last
// pieces are posted (its answer must come after them).
class Streams {
 public:
  class Stream {
   public:
    Stream(Streams* owner, std::string id) : owner_(owner), id_(std::move(id)) {}
    void Emit(Json chunk) { owner_->Emit(*this, std::move(chunk)); }
    bool cancelled() const { return cancel_.load(); }
    void Close() { owner_->Close(*this); }

   private:
    friend class Streams;
    Streams* owner_;
    const std::string id_;
    std::atomic<bool> cancel_{false};
    Json pending_ = Json::array();  // GUARDED_BY(owner_->mu_)
    bool closing_ = false;          // GUARDED_BY(owner_->mu_)
    bool closed_ = false;           // GUARDED_BY(owner_->mu_)
  };

  explicit Streams(const WorkerConfig& cfg) {
    thread_ = std::thread([this, url = cfg.url, token = cfg.token] { Run(url, token); });
  }
  ~Streams() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }

  std::shared_ptr<Stream> Open(const std::string& id) {
    auto s = std::make_shared<Stream>(this, id);
    std::lock_guard<std::mutex> lock(mu_);
    open_[id] = s;
    return s;
  }

 private:
  void Emit(Stream& s, Json chunk) {
    std::lock_guard<std::mutex> lock(mu_);
    s.pending_.push_back(std::move(chunk));
    cv_.notify_all();
  }
  void Close(Stream& s) {
    std::unique_lock<std::mutex> lock(mu_);
    if (s.closed_ || !open_.count(s.id_)) return;
    s.closing_ = true;
    cv_.notify_all();
    closed_cv_.wait(lock, [&] { return s.closed_; });
  }

  bool Pending() const {  // REQUIRES(mu_)
    for (const auto& [id, s] : open_) {
      if (!s->pending_.empty() || s->closing_) return true;
    }
    return false;
  }
  bool Closing() const {  // REQUIRES(mu_)
    for (const auto& [id, s] : open_) {
      if (s->closing_) return true;
    }
    return false;
  }

  void Run(const std::string& url, const std::string& token) {
    constexpr auto kBatch = std::chrono::milliseconds(20), kKeepAlive = std::chrono::milliseconds(250);
    ControlPlane cp(url, token);  // one connection per thread
    std::unique_lock<std::mutex> lock(mu_);
    auto last = Clock::now();
    for (;;) {
      if (!stop_ && !Pending()) cv_.wait_until(lock, last + kKeepAlive, [&] { return stop_ || Pending(); });
      // A closing call's answer waits for this post: no batching then.
      if (!stop_ && !Closing()) cv_.wait_until(lock, last + kBatch, [&] { return stop_ || Closing(); });
      if (open_.empty()) {
        if (stop_) return;
        last = Clock::now();
        continue;
      }
      Json calls = Json::array();
      std::vector<std::shared_ptr<Stream>> finishing;  // closing when their pieces were taken
      for (auto& [id, s] : open_) {
        if (s->closing_) finishing.push_back(s);
        Json chunks = std::exchange(s->pending_, Json::array());  // a cancelled call's: nobody reads them
        if (!s->cancel_) calls.push_back({{"id", id}, {"chunks", std::move(chunks)}});
      }
      lock.unlock();
      Reply r;
      if (!calls.empty()) r = cp.Post("sample_chunks", {{"calls", calls}});
      lock.lock();
      if (r.status == 401) {  // this worker's token is no longer valid: nobody reads these pieces
        for (auto& [id, s] : open_) s->cancel_ = true;
      } else if (r.status == 200) {
        for (const Json& id : r.body.value("stop", Json::array())) {
          auto it = id.is_string() ? open_.find(id.get<std::string>()) : open_.end();
          if (it != open_.end()) it->second->cancel_ = true;
        }
      }  // else (no answer, 5xx): these pieces are lost; the next post carries the next
      for (auto& s : finishing) {
        s->closed_ = true;
        open_.erase(s->id_);
      }
      if (stop_) {  // every call was answered (so closed) before the batch ended; any left is dropped
        for (auto& [id, s] : open_) s->closed_ = true;
        open_.clear();
      }
      if (!finishing.empty() || stop_) closed_cv_.notify_all();
      if (stop_) return;
      last = Clock::now();
    }
  }

  std::mutex mu_;
  std::condition_variable cv_;                           // to the sender
  std::condition_variable closed_cv_;                    // to Close
  std::map<std::string, std::shared_ptr<Stream>> open_;  // GUARDED_BY(mu_)
  bool stop_ = false;                                    // GUARDED_BY(mu_)
  std::thread thread_;
};

struct Call {
  std::string id;
  PreparedSample prep;
  std::shared_ptr<Streams::Stream> stream;  // a streamed call's
  int64_t peak = 1;                         // calls in the batch at most while it ran
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
    std::fprintf(stderr, "%s sampling %s failed: %s\n", LogStamp().c_str(), call.id.c_str(),
                 s.ToString().c_str());
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

// Asks the control plane for calls that joined the batch (sample_join),
// from a thread of its own: at once again after a call came, else every
// 10 ms, so the decoding thread never waits on the control plane for them.
class Joiner {
 public:
  explicit Joiner(const WorkerConfig& cfg) {
    thread_ = std::thread([this, url = cfg.url, token = cfg.token] { Run(url, token); });
  }
  ~Joiner() { Stop(); }

  // The calls that came since the last Take.
  std::vector<Json> Take() {
    std::lock_guard<std::mutex> lock(mu_);
    return std::exchange(tasks_, {});
  }
  // Stops asking (a call handed over meanwhile is kept for Take).
  void Stop() {
    if (!thread_.joinable()) return;
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }

 private:
  void Run(const std::string& url, const std::string& token) {
    ControlPlane cp(url, token);  // one connection per thread
    std::unique_lock<std::mutex> lock(mu_);
    while (!stop_) {
      lock.unlock();
      Reply r = cp.Post("sample_join", Json::object());
      lock.lock();
      if (r.status == 200) {
        tasks_.push_back(r.body.value("task", Json::object()));
        continue;
      }
      // 204: none now (an error: asked again in 10 ms)
      cv_.wait_for(lock, std::chrono::milliseconds(10), [&] { return stop_; });
    }
  }

  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<Json> tasks_;  // GUARDED_BY(mu_)
  bool stop_ = false;        // GUARDED_BY(mu_)
  std::thread thread_;
};

// Posts finished calls' answers from a thread of its own (a stream's last
// pieces first), so the batch decodes on meanwhile; the destructor waits
// for every answer to be posted.
class Answerer {
 public:
  explicit Answerer(const WorkerConfig& cfg) {
    thread_ = std::thread([this, url = cfg.url, token = cfg.token] { Run(url, token); });
  }
  ~Answerer() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      done_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }
  void Post(Call call, Json result) {
    std::lock_guard<std::mutex> lock(mu_);
    queue_.push_back({std::move(call), std::move(result)});
    cv_.notify_all();
  }

 private:
  void Run(const std::string& url, const std::string& token) {
    ControlPlane cp(url, token);
    std::unique_lock<std::mutex> lock(mu_);
    for (;;) {
      cv_.wait(lock, [&] { return done_ || !queue_.empty(); });
      if (queue_.empty()) return;  // done, and nothing left
      auto [call, result] = std::move(queue_.front());
      queue_.pop_front();
      lock.unlock();
      Answer(cp, call, result, Status());
      lock.lock();
    }
  }

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::pair<Call, Json>> queue_;  // GUARDED_BY(mu_)
  bool done_ = false;                        // GUARDED_BY(mu_)
  std::thread thread_;
};

}  // namespace

void RunSampleCalls(ControlPlane& cp, const WorkerConfig& cfg, const Json& first_task, Samplers& samplers) {
  Streams streams(cfg);  // outlives every call (and the answerer that closes them)
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
        call.stream = streams.Open(call.id);
        Streams::Stream* stream = call.stream.get();
        const Tokenizer* tok = call.prep.tokenizer;
        p.on_delta = [stream, tok](int64_t index, const std::string& delta, int token, float logprob,
                                   const TokenAlternatives& top, const std::string& reason) {
          Json piece = {{"index", index},
                        {"delta", delta},
                        {"token", token >= 0 ? Json(tok->Decode({token})) : Json()},
                        {"logprob", token >= 0 ? Json(logprob) : Json()},
                        {"finish_reason", reason.empty() ? Json() : Json(reason)}};
          if (!top.empty()) piece["top"] = AlternativesJson(*tok, top);
          stream->Emit(std::move(piece));
        };
        p.should_stop = [stream] { return stream->cancelled(); };
      }
      const int64_t rid = decoder->Add(call.prep.ids, std::move(p));
      calls.emplace(rid, std::move(call));
    });
    if (!s.ok()) Answer(cp, call, Json(), s);
  };
  // Calls that joined the batch: asked for once synchronously, while the
  // batch is empty or about to be.
  auto join = [&] {
    for (;;) {
      Reply r = cp.Post("sample_join", Json::object());
      if (r.status != 200) return;  // 204: none now (an error: asked again at the next step)
      add(r.body.value("task", Json::object()));
    }
  };
  // Where the batch's time went, for its log line.
  const auto started = Clock::now();
  double step_s = 0;
  int64_t served = 0, steps = 0, peak = 0;
  add(first_task);
  // Calls that joined while the first one's weights loaded start with it
  // (one prefill for prompts sharing a prefix).
  join();
  {
    Answerer answers(cfg);
    while (decoder && !decoder->idle()) {
      Joiner joiner(cfg);  // while the batch decodes
      Status s;
      while (s.ok() && !decoder->idle()) {
        for (const Json& task : joiner.Take()) add(task);
        for (auto& [rid, call] : calls) call.peak = std::max(call.peak, static_cast<int64_t>(calls.size()));
        peak = std::max(peak, static_cast<int64_t>(calls.size()));
        const auto t0 = Clock::now();
        s = Try([&] { decoder->Step(); });
        step_s += SecondsSince(t0);
        ++steps;
        if (!s.ok()) break;
        for (FinishedRequest& done : decoder->TakeFinished()) {
          auto it = calls.find(done.id);
          Call& call = it->second;
          Json result = SampleResultJson(call.prep, done);
          result["batch_peak"] = call.peak;
          // A loop request's time on the worker (loading included), as its other requests report it.
          if (call.prep.loop) result["compute_ms"] = 1000.0 * SecondsSince(call.added);
          answers.Post(std::move(call), std::move(result));
          calls.erase(it);
          ++served;
        }
      }
      joiner.Stop();
      if (!s.ok()) {  // the decoder failed: every call in it, or handed to it, with the error
        for (auto& [rid, call] : calls) Answer(cp, call, Json(), s);
        for (const Json& task : joiner.Take()) {
          Call call;
          call.id = task.value("id", "");
          Answer(cp, call, Json(), s);
        }
        return;
      }
      // The batch is empty: the calls the joiner took, and one last ask.
      for (const Json& task : joiner.Take()) add(task);
      join();
    }
  }  // every answer posted
  std::fprintf(stderr, "%s sampled %lld calls (%lld at once at most) in %.3f s, %lld steps in %.3f s\n",
               LogStamp().c_str(), static_cast<long long>(served), static_cast<long long>(peak),
               SecondsSince(started), static_cast<long long>(steps), step_s);
}

}  // namespace burst
