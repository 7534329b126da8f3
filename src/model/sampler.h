// Sampling with a KV cache: temperature, top-k, top-p, stop strings, seed.
//
// Returns the sampled token ids, the model's raw log-probability of each
// (before temperature, top-k and top-p), the decoded text and why it stopped.
// A sampled end-of-turn id (tokenizer.stop_ids) ends a sample with "stop"
// and is kept in token_ids but not in text; a stop string ends it with "stop"
// and the text is cut before it.
//
// Thread-safety: runs on the caller's thread; the model is only read.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "core/sample_limits.h"
#include "model/llama.h"
#include "model/tokenizer.h"

namespace burst {

// The likeliest tokens at one position and their raw logprobs, likeliest first.
using TokenAlternatives = std::vector<std::pair<int, float>>;

struct SampleParams {
  int64_t max_tokens = 64;
  double temperature = 1.0;  // 0 = greedy
  double top_p = 1.0;        // 1 = off
  int64_t top_k = 0;         // 0 = off
  std::vector<std::string> stop;
  uint64_t seed = 0;
  int64_t n = 1;
  // Token ids that end a sample besides the tokenizer's own stop ids (a chat
  // template's end-of-turn token), for callers sharing a const tokenizer.
  std::vector<int> extra_stop_ids;
  // The prompt's own logprobs from the prefill (BatchDecoder: a request's
  // FinishedRequest holds them): each prompt token's, and the k likeliest
  // tokens at each prompt position. With either, max_tokens may be 0 (the
  // prompt scored, nothing sampled).
  bool prompt_logprobs = false;
  int64_t topk_prompt_logprobs = 0;
  // For each sampled token, the k likeliest tokens at its position (raw
  // logprobs, as `logprobs`): SampleOutput::top_logprobs, and on_delta's
  // `top`. At most kMaxTopLogprobs.
  int64_t top_logprobs = 0;
  // Streaming: called for every sampled token of sample `index` with the
  // text it adds (possibly empty: text that might still turn out to be the
  // start of a stop string, or an incomplete UTF-8 character, is held back),
  // and once more at the end with token -1, the rest of the text and the
  // finish reason. The deltas of a sample concatenate to its final text.
  // `top` holds the token's alternatives when top_logprobs asks for them.
  std::function<void(int64_t index, const std::string& delta, int token, float logprob,
                     const TokenAlternatives& top, const std::string& finish_reason)>
      on_delta;
  // Checked before each token is sampled: true stops every sample there,
  // with what it has so far and finish_reason "cancelled" (a worker whose
  // caller went away). on_delta still gets its final call.
  std::function<bool()> should_stop;
};

struct SampleOutput {
  std::vector<int> token_ids;
  std::vector<float> logprobs;
  std::vector<TokenAlternatives> top_logprobs;  // one per token, when asked
  std::string text;
  std::string finish_reason;  // "stop", "length", or "cancelled" (should_stop)
};

std::vector<SampleOutput> Sample(const LlamaModel& model, const Tokenizer& tokenizer,
                                 const std::vector<int>& prompt, const SampleParams& params);

// Greedy continuation of each prompt until a stop id or max_tokens; the
// generated ids only. Used by eval's exact match.
std::vector<int> GreedyIds(const LlamaModel& model, const std::vector<int>& prompt,
                           const std::vector<int>& stop_ids, int64_t max_tokens);

}  // namespace burst
