// Evaluation on held-out data: loss, token accuracy, exact match of greedy
// completions, and label accuracy where completions come from a fixed set.
//
// Label accuracy scores every label's log-likelihood after the prompt and
// picks the highest, so a model that knows nothing scores near chance
// (1 / labels), not zero as exact match would.
//
// Thread-safety: runs on the caller's thread; the model is only read.
#pragma once

#include <functional>
#include <optional>
#include <vector>

#include "core/json.h"
#include "model/llama.h"
#include "model/tokenizer.h"
#include "train/data.h"

namespace burst {

struct EvalOptions {
  int64_t batch_size = 8;
  bool exact_match = true;
  bool label_accuracy = true;
  // A label set is used when it has 2..max_labels distinct completions and
  // each appears at least twice on average.
  int64_t max_labels = 32;
  // Checked between batches and examples; true stops the evaluation with
  // kCancelled (an evaluation job that is cancelled or preempted).
  std::function<bool()> should_stop;
};

struct EvalResult {
  double loss = 0.0;
  double token_acc = 0.0;
  std::optional<double> exact_match;
  std::optional<double> label_acc;
  int64_t examples = 0;
  int64_t loss_tokens = 0;
  int64_t labels = 0;
  Json ToJson() const;
};

EvalResult Evaluate(const LlamaModel& model, const Tokenizer& tokenizer, const Dataset& data,
                    const EvalOptions& options = {});

// Pads examples [begin, end) into (B, T) inputs/targets/weights on device.
struct Batch {
  torch::Tensor inputs;   // (B, T-1) int64
  torch::Tensor targets;  // (B, T-1) int64
  torch::Tensor weights;  // (B, T-1) float
  int64_t tokens = 0;     // non-padding tokens fed
};
Batch MakeBatch(const std::vector<const Example*>& examples, torch::Device device);
// The same examples packed end to end in one row, no padding: inputs,
// targets and weights (1, N), N the sum of (length - 1), and seq_lens for
// ForwardOptions::seq_lens (examples shorter than 2 tokens predict nothing
// and are left out).
struct PackedBatch : Batch {
  std::vector<int64_t> seq_lens;
};
PackedBatch MakePackedBatch(const std::vector<const Example*>& examples, torch::Device device);
// Narrows a batch's targets and weights to its positions of non-zero weight,
// (1, M), and asks the forward for those positions only
// (ForwardOptions::outputs): the hidden states it returns then line up with
// them, and the last layer skips every other position.
void SelectLossPositions(Batch* batch, ForwardOptions* options);

// Sum of log p(completion | prompt) for each (prompt, completion) pair, in
// one padded batch: (N), differentiable (DPO trains through it). Adds the
// non-padding tokens fed to *tokens when given.
using PromptCompletion = std::pair<const std::vector<int>*, const std::vector<int>*>;
// `checkpoint_layers`: ForwardOptions::checkpoint_layers (DPO's training).
torch::Tensor CompletionLogProbs(const LlamaModel& model, const std::vector<PromptCompletion>& seqs,
                                 int64_t* tokens = nullptr, bool checkpoint_layers = false);

// Greedy completions of each example's prompt_ids, decoded together
// (BatchDecoder: one forward per token for up to 32 prompts, a prompt prefix
// they share prefilled once), up to max_tokens each, ending before the first
// of stop_ids. Greedy takes the argmax, so each completion is what GreedyIds
// (sampler.h) gives it alone, up to float rounding at a near-tie.
// check_stop, when set, runs before each decoding step (it may throw).
std::vector<std::vector<int>> GreedyCompletions(const LlamaModel& model, const Tokenizer& tokenizer,
                                                const std::vector<const Example*>& examples,
                                                const std::vector<int>& stop_ids, int64_t max_tokens,
                                                const std::function<void()>& check_stop = {});

// log p(label | prompt_ids) for every example and label: (E, K), what
// CompletionLogProbs gives each pair up to float rounding. Each example's
// prompt is computed once with its labels after it in the same packed row
// (train/loop_pack.h), so E x K scores cost E prompts and the labels' tokens.
torch::Tensor LabelLogProbs(const LlamaModel& model, const std::vector<const Example*>& examples,
                            const std::vector<std::vector<int>>& labels);

}  // namespace burst
