// A worker's sampling: checkpoints it has sampled from, kept loaded, and one
// sampling call (plain or streamed) answered to the control plane.
//
// The base model stays in BaseModels' cache; a LoRA checkpoint is the
// base's tensors plus its adapter, swapped in per call. A few checkpoints
// are kept, least recently used first out (one full fine-tune).
//
// Thread-safety: a Samplers is used by the worker's main loop only.
// Errors: throw burst::Error (the store's, the manifest's, the loaders').
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <list>
#include <string>
#include <utility>

#include "core/json.h"
#include "model/llama.h"
#include "model/tokenizer.h"
#include "store/object_store.h"
#include "worker/base_models.h"
#include "worker/control_plane.h"
#include "worker/worker.h"

namespace burst {

class Samplers {
 public:
  Samplers(const ObjectStore& store, BaseModels& models, std::filesystem::path dir)
      : store_(store), models_(models), dir_(std::move(dir)) {}

  // The model a task names ({model, model_store, checkpoint_prefix, full})
  // and its tokenizer; valid until the next call.
  std::pair<const LlamaModel*, const Tokenizer*> Model(const Json& task);
  // Loads the task's base model and checkpoint (a deployment's replica does
  // this before its first call).
  void Warm(const Json& task);
  // The checkpoint prefixes held loaded, most recent first (the lease says
  // them, so a deployment knows which replicas are ready).
  Json Loaded() const;
  // Samples a call's request. `emit` receives streamed pieces ({index,
  // delta, token, logprob, finish_reason}) when the task asks for a stream;
  // `should_stop` is checked before each token (the call was cancelled).
  Json Run(const Json& task, const std::function<void(Json)>& emit, const std::function<bool()>& should_stop);

 private:
  const LlamaModel& Checkpoint(const std::string& prefix, bool full, const BaseModel& base);

  const ObjectStore& store_;
  BaseModels& models_;
  std::filesystem::path dir_;
  std::list<std::pair<std::string, LlamaModel>> loaded_;
  int64_t fetches_ = 0;  // checkpoints fetched and loaded (cache misses)
};

// One sampling call. A streamed call sends its pieces from a thread of its
// own: batched for at most 20 ms, and at least every 250 ms while the call
// runs (an empty batch is a keep-alive), so a caller that went away is
// learnt within a quarter of a second from the answer ({"cancel": true}, or
// 409: the call is no longer this worker's) and the sampler stops before
// its next token. Then the answer: the result, or the error; a cancelled
// call answers {code: "cancelled"} with what it sampled until then, which is
// what is billed.
void RunSampleCall(ControlPlane& cp, const WorkerConfig& cfg, const Json& task, Samplers& samplers);

}  // namespace burst
