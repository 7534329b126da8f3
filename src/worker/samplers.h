// A worker's sampling: checkpoints it has sampled from, kept loaded, and
// what a sampling call's task asks for (worker/sample_calls.h decodes calls
// and answers them).
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
#include "model/batch_decoder.h"
#include "model/llama.h"
#include "model/sampler.h"
#include "model/tokenizer.h"
#include "store/object_store.h"
#include "worker/base_models.h"
#include "worker/control_plane.h"
#include "worker/worker.h"

namespace burst {

struct PreparedSample {
  const LlamaModel* model = nullptr;
  const Tokenizer* tokenizer = nullptr;
  std::vector<int> ids;  // the prompt
  SampleParams params;   // without callbacks
  double load_ms = 0;    // spent loading the model or checkpoint for it
  bool loaded = false;   // it had to load one
  bool loop = false;     // a training loop's sample request (Tinker's), not an API call
};

// The answer to a sampling call: {prompt_tokens, load_ms, loaded, samples:
// [{text, token_ids, tokens, logprobs, top_logprobs?, finish_reason}],
// prompt?: {text, tokens, logprobs, top_logprobs?}} (prompt when the call
// asked for `echo`; its first token has no logprob: null); to a loop's
// sample request, LoopSampleResultJson's.
Json SampleResultJson(const PreparedSample& prep, const FinishedRequest& done);
// A position's alternatives as [[token text, logprob], ...], likeliest first.
Json AlternativesJson(const Tokenizer& tok, const TokenAlternatives& top);
// A loop sample request's answer: {result: {sequences: [{tokens, logprobs,
// stop_reason}], prompt_logprobs?: [null, ...], topk_prompt_logprobs?:
// [null, [[id, logprob], ...], ...]}, loaded, usage: {prefill_tokens,
// sampled_tokens}}.
Json LoopSampleResultJson(const PreparedSample& prep, const FinishedRequest& done);

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
  // A call's model (loaded if need be), prompt ids and sampling
  // parameters, from its task ({request: {prompt | messages, max_tokens,
  // temperature, top_p, seed, n, stop}, ...}, or a loop's {op: {type:
  // "sample", prompt: [ids], num_samples, max_tokens, ..., checkpoint_prefix}}). The model and tokenizer
  // pointers are valid while no other checkpoint is loaded.
  PreparedSample Prepare(const Json& task);

 private:
  const LlamaModel& Checkpoint(const std::string& prefix, bool full, const BaseModel& base);

  const ObjectStore& store_;
  BaseModels& models_;
  std::filesystem::path dir_;
  std::list<std::pair<std::string, LlamaModel>> loaded_;
  int64_t fetches_ = 0;  // checkpoints fetched and loaded (cache misses)
};

}  // namespace burst
