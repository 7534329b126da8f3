// BatchDecoder: continuous batching. Many sampling requests decode as one
// batch, one row of a shared KV cache per sequence, each row at its own
// position; a request waiting for rows joins as soon as others finish.
//
// A request is a prompt and SampleParams (sampler.h): its n samples share
// one prefill (the prompt's keys and values are copied to n rows), then every
// step feeds one token per live row through a single forward. Requests
// admitted together whose prompts share a long prefix (16+ tokens) prefill
// it once, and each its own rest. With prompt_logprobs the prefill's logits
// give the prompt's own logprobs (FinishedRequest). What a sample
// gets does not depend on what else is in the batch: each sample draws from
// its own generator (sample 0 from `seed`, sample k from a mix of seed and
// k), stops on its own, and streams through its own request's on_delta. Up
// to float rounding: a batch of another shape rounds the logits' last bits
// differently, which changes a logprob slightly and, at a near-tie, a token
// (seen in 128-token runs of bench/decode_bench.cpp).
//
// Thread-safety: one thread drives a decoder (Add, Step, TakeFinished); the
// model is only read. Errors: Add throws burst::Error naming the parameter;
// Step throws what the model throws (the caller ends every request then).
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <string>
#include <vector>

#include "model/llama.h"
#include "model/sampler.h"
#include "model/tokenizer.h"

namespace burst {

struct BatchDecoderOptions {
  // Sequences decoded at once (a request needs n of them; one that needs
  // more runs alone). The KV cache grows to what admitted requests need
  // (rows, and prompt + max_tokens positions, never past the context).
  int64_t max_rows = 32;
};

// A request's answer: its n samples, and what the prefill gave of the
// prompt when asked (SampleParams::prompt_logprobs, ::topk_prompt_logprobs).
struct FinishedRequest {
  int64_t id = 0;
  std::vector<SampleOutput> samples;
  // log p(prompt[i] | prompt[<i]) for i = 1 .. size-1 (the first token has none).
  std::vector<float> prompt_logprobs;
  // For i = 1 .. size-1: the k likeliest tokens at position i (given
  // prompt[<i]) and their logprobs, likeliest first.
  std::vector<TokenAlternatives> topk_prompt_logprobs;
};

class BatchDecoder {
 public:
  BatchDecoder(const LlamaModel& model, const Tokenizer& tokenizer, BatchDecoderOptions options = {});

  // Queues a request and returns its id (0, 1, ...). Throws kInvalidArgument
  // for bad parameters, as Sample does.
  int64_t Add(std::vector<int> prompt, SampleParams params);

  // Admits queued requests into free rows (in order: one that does not fit
  // waits, and so do those behind it), prefilling each, then samples one
  // token for every live row and feeds them through one forward. False
  // when there is nothing left to do.
  bool Step();

  // Requests finished since the last call, with their outputs (n each).
  std::vector<FinishedRequest> TakeFinished();

  // The seed sample k of a request seeded `seed` draws from: the seed
  // itself for k = 0 (so n = 1 draws what a lone sample draws), else a
  // SplitMix64 mix of both.
  static uint64_t SampleSeed(uint64_t seed, int64_t k);

  int64_t live_rows() const;
  int64_t rows() const { return static_cast<int64_t>(rows_.size()); }
  int64_t waiting() const { return static_cast<int64_t>(queue_.size()); }
  bool idle() const { return queue_.empty() && requests_.empty(); }

 private:
  // One sample of a request: its output so far and what streaming needs.
  struct Seq {
    SampleOutput out;
    at::Generator gen;
    std::vector<int> text_ids;  // sampled ids but a final stop id
    bool cut = false;           // a stop string cut the text (which may leave it empty)
    size_t streamed = 0;        // bytes of text already given to on_delta
    bool done = false;
  };
  struct Request {
    std::vector<int> prompt;
    SampleParams params;
    int64_t max_new = 0;  // tokens each sample may add (max_tokens, within the context)
    std::vector<Seq> seqs;
    std::vector<float> prompt_logprobs;  // when asked
    std::vector<TokenAlternatives> topk_prompt_logprobs;
    int64_t live = 0;      // samples not done
    bool stopped = false;  // should_stop said so
  };
  // A row of the cache: free (request -1) or one sample's sequence.
  struct Row {
    int64_t request = -1, index = 0;
    torch::Tensor logits, logp;  // (V) on the CPU: the next token's, raw and log-softmaxed
    int64_t token = 0;           // the last accepted token, fed to the next forward
  };

  // A stretch of one row's prompt to prefill: tokens[0, len) at positions
  // start.. of cache row `row`; `full` keeps every position's logits.
  struct PrefillPiece {
    int64_t row = 0;
    const int* tokens = nullptr;
    int64_t len = 0, start = 0;
    bool full = false;
    torch::Tensor last, all;  // out: the last position's logits (V); every position's (len, V) when full

    PrefillPiece(int64_t row_, const int* tokens_, int64_t len_, int64_t start_, bool full_)
        : row(row_), tokens(tokens_), len(len_), start(start_), full(full_) {}
  };

  void Admit();
  // Runs the pieces' forwards (batched, padded), filling last / all.
  void Prefill(std::vector<PrefillPiece>& pieces);
  // Grows the cache to `rows` rows and `positions` positions (keeping what it holds).
  void EnsureCache(int64_t rows, int64_t positions);
  // Samples the next token of every live row (rows sampling alike share
  // the tensor work) and accepts it.
  void PickAll();
  // Fills req's prompt logprobs from the prefill's logits at its prompt's
  // positions but the last.
  void PromptLogprobs(Request& req, const torch::Tensor& logits);
  // Adds `tok` to the sequence in `row`: stop ids, stop strings, streaming,
  // max_tokens; the row is freed when the sample is done, else `token` is
  // fed to the next forward.
  void Accept(Row& row, int64_t tok);
  void Finish(int64_t request_id);

  const LlamaModel& model_;
  const Tokenizer& tok_;
  BatchDecoderOptions opt_;
  KVCache cache_;
  std::vector<Row> rows_;
  std::map<int64_t, Request> requests_;  // admitted, not finished
  std::deque<std::pair<int64_t, Request>> queue_;
  std::vector<FinishedRequest> finished_;
  int64_t next_id_ = 0;
};

// Checks SampleParams and the prompt against the model's context (what Add
// and Sample refuse): kInvalidArgument naming the parameter.
void ValidateSampleRequest(const LlamaModel& model, const std::vector<int>& prompt, const SampleParams& p);

}  // namespace burst
