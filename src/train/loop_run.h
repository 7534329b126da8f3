// LoopRun: the engine side of a training loop run as a service (Tinker's
// forward_backward / optim_step / sample / save_state on one LoRA model).
//
// A run is the base model's frozen tensors (shared, never copied) plus
// its own LoRA adapter on the attention and/or MLP projections and/or the LM
// head, an AdamW state and the gradients accumulated since the last
// optim_step. ForwardBackward computes each datum's target log-probabilities
// in one padded batch (datums sharing a prompt packed into one row, the
// prompt computed once: train/loop_pack.h), the loss per token
// (LoopTokenLoss), and adds the
// gradient of their sum over tokens and datums (no mean) to the
// accumulated gradients; OptimStep applies them once with the request's
// Adam parameters and clears them. State() / LoadState() carry everything
// a later step depends on (adapter, moments, step count), so a run
// restored elsewhere continues bit for bit.
//
// Thread-safety: one thread per run; the base model is only read.
// Errors: throw burst::Error.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "model/llama.h"
#include "train/loop_data.h"
#include "train/optimizer.h"

namespace burst {

// The loss at each token, from the model's log-probabilities `lp` of the
// targets (N) and the datum inputs over the same N tokens (weights,
// logprobs, advantages, clip thresholds; float tensors of lp's dtype):
//   cross_entropy        -w lp
//   importance_sampling  -r A,                     r = exp(lp - q)
//   ppo                  -min(r A, clip(r, lo, hi) A)
//   cispo                -sg(clip(r, lo, hi)) lp A
//   dro                  -(lp A - beta/2 (lp - q)^2)
// Per-token clip_low_threshold / clip_high_threshold inputs override the
// config's. Differentiable in lp; any floating dtype (tests use float64).
torch::Tensor LoopTokenLoss(const std::string& loss_fn, const torch::Tensor& lp,
                            const std::map<std::string, torch::Tensor>& inputs,
                            const std::map<std::string, double>& config);

struct LoopLoraOptions {
  int64_t rank = 32;
  uint64_t seed = 0;
  bool train_attn = true, train_mlp = true, train_unembed = true;
  double alpha = 32.0;  // scale alpha / rank
};

struct LoopAdamParams {
  double learning_rate = 1e-4, beta1 = 0.9, beta2 = 0.95, eps = 1e-12, weight_decay = 0.0;
  double grad_clip_norm = 0.0;  // 0 = no clipping
};

struct LoopForwardResult {
  // Per datum: "logprobs" and "elementwise_loss", one value per token.
  std::vector<std::map<std::string, std::vector<float>>> outputs;
  double loss_sum = 0.0;
  int64_t tokens = 0;      // the datums' tokens
  int64_t fed_tokens = 0;  // tokens fed through the model (fewer when datums share prompts)
};

class LoopRun {
 public:
  // A new adapter on `base` (which must outlive the run).
  LoopRun(const LlamaModel& base, const LoopLoraOptions& lora);

  // forward_backward (backward = true) or forward. `config` from ParseLossConfig.
  LoopForwardResult Forward(const std::vector<LoopDatum>& data, const std::string& loss_fn,
                            const std::map<std::string, double>& config, bool backward);
  // One AdamW update from the accumulated gradients, which it then clears.
  // Metrics: grad_norm (before clipping), learning_rate, step.
  Json OptimStep(const LoopAdamParams& params);

  // The adapter and optimizer state as tensors ("lora.<PEFT name>",
  // "exp_avg.<name>", "exp_avg_sq.<name>", "step"); LoadState takes it back
  // (weights only, fresh moments and step 0, without the optimizer).
  NamedTensors State() const;
  void LoadState(const TensorMap& state, bool with_optimizer);

  const LlamaModel& model() const { return model_; }
  LlamaModel& mutable_model() { return model_; }
  int64_t steps() const { return opt_.steps(); }
  const LoopLoraOptions& lora() const { return lora_; }
  // Whether gradients wait for an optim_step.
  bool has_pending_grads() const { return pending_; }

 private:
  LoopLoraOptions lora_;
  LlamaModel model_;  // the base's tensors plus this run's adapter
  AdamW opt_;
  bool pending_ = false;
};

// The LoRA targets of Tinker's flags (attention: q, k, v, o; MLP: gate, up,
// down; unembed: lm_head); kInvalidArgument if none is set.
LoraSpec LoopLoraSpec(const LoopLoraOptions& lora);

}  // namespace burst
