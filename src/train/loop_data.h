// The data of a training loop's requests (Tinker's wire types), checked.
//
// A `Datum` is {model_input: {chunks: [{type: "encoded_text", tokens}]},
// loss_fn_inputs: {name: TensorData}}, a TensorData {data, dtype, shape}
// with dtype "int64" or "float32". The control plane parses a request's data
// with these before it queues anything (a request that fails here creates
// nothing) and the worker parses the same bytes again before it computes.
//
// What each loss needs (docs/loops.md, "Data and losses"): every loss takes
// target_tokens; cross_entropy takes weights (default 1 at every position);
// importance_sampling, ppo, cispo and dro take logprobs (the sampler's) and
// advantages; ppo and cispo may also take per-token clip_low_threshold /
// clip_high_threshold. Each input is one value per input token.
//
// Thread-safety: stateless functions. Errors: throw burst::Error
// (kInvalidArgument) naming the field's path ("data[2].loss_fn_inputs.weights").
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/json.h"

namespace burst {

// The loss functions a session computes, by Tinker's names.
extern const std::vector<std::string> kLoopLossNames;

// Whether a request of this type changes a run's state (forward_backward,
// optim_step, load_weights): what the control plane keeps to replay and the
// worker counts as the run's version.
bool LoopOpChangesState(const std::string& type);

struct LoopDatum {
  std::vector<int64_t> tokens;                       // the model input, chunks joined
  std::vector<int64_t> targets;                      // target_tokens (same length)
  std::map<std::string, std::vector<float>> inputs;  // the float inputs by name (same length)
};

struct LoopDataLimits {
  int64_t vocab_size = 0;   // tokens and targets must lie in [0, vocab_size)
  int64_t max_seq_len = 0;  // per datum (0 = no limit)
  int64_t max_tokens = 0;   // over the whole request (0 = no limit)
};

// The datums of a forward / forward_backward request, checked for `loss_fn`
// (kLoopLossNames). `path` names the list ("forward_backward_input.data").
std::vector<LoopDatum> ParseLoopData(const Json& data, const std::string& loss_fn,
                                     const LoopDataLimits& limits, const std::string& path);

// A loss function's configuration: the numbers it reads, defaults filled in
// (ppo/cispo: clip_low_threshold 0.8, clip_high_threshold 1.2; dro: beta
// 0.05). Unknown keys are errors naming them; `path` names the object.
std::map<std::string, double> ParseLossConfig(const std::string& loss_fn, const Json& config,
                                              const std::string& path);

// Tokens of a ModelInput ({chunks: [...]}), for sampling prompts too.
std::vector<int64_t> ParseModelInput(const Json& model_input, const LoopDataLimits& limits,
                                     const std::string& path);

// A TensorData of one row as JSON ({data, dtype, shape}).
Json TensorDataJson(const std::vector<float>& values);
Json TensorDataJson(const std::vector<int64_t>& values);

}  // namespace burst
