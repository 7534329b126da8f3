// LlamaModel: the Llama decoder (Hugging Face LlamaForCausalLM) on libtorch,
// with LoRA adapters on any of its seven projections; the families built
// the same way (Mistral, Qwen 2 and 3: LlamaConfig) differ by a config
// field the forward reads (q/k/v biases, q/k norms, the attention window).
//
// Owns the weight tensors (named as in Hugging Face in BaseWeights()), the
// optional LoRA pairs (named as in PEFT in LoraWeights()), and the forward
// pass, with a KV cache for sampling. The forward is written out by hand in
// llama.cpp, one banner per block and a shape comment on every tensor;
// autograd gives the backward.
//
// Thread-safety: Forward() is const and may run concurrently without a
// cache; a KVCache belongs to one caller. Weights are mutated only by the
// trainer and loaders. Errors: throw burst::Error / c10::Error.
#pragma once

#include <torch/torch.h>

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "model/config.h"
#include "model/lora_spec.h"
#include "model/safetensors.h"

namespace burst {

struct LoraPair {
  torch::Tensor a;  // (r, in)
  torch::Tensor b;  // (out, r)
};

struct LlamaLayer {
  torch::Tensor input_norm;                      // (C)
  torch::Tensor q_proj;                          // (H*D, C)
  torch::Tensor k_proj;                          // (KV*D, C)
  torch::Tensor v_proj;                          // (KV*D, C)
  torch::Tensor o_proj;                          // (C, H*D)
  torch::Tensor q_bias, k_bias, v_bias, o_bias;  // (out): q, k, v with HasQkvBias(), o with attention_bias
  torch::Tensor q_norm, k_norm;                  // (D) with qk_norm: RMSNorm of each head before rotary
  torch::Tensor post_norm;                       // (C): before the MLP; Gemma: on the attention's output
  torch::Tensor pre_ff_norm, post_ff_norm;       // (C) Gemma: before the MLP and on its output
  torch::Tensor gate_proj;                       // (F, C)
  torch::Tensor up_proj;                         // (F, C)
  torch::Tensor down_proj;                       // (C, F)
  // After FreezeBaseAs: q, k, v as one matrix ((H+2KV)*D, C) and gate, up as
  // one (2F, C), the per-name weights above being views of their row blocks.
  torch::Tensor qkv_proj, gate_up_proj;
  // A mixture-of-experts layer's MLP (LlamaConfig::IsMoeLayer) instead of
  // gate/up/down: the router (E, C) and each expert's SwiGLU.
  torch::Tensor router;
  std::vector<torch::Tensor> expert_gate, expert_up;  // E of (Fm, C)
  std::vector<torch::Tensor> expert_down;             // E of (C, Fm)
  // After FreezeBaseAs: each expert's gate and up as one (2Fm, C), the
  // per-expert weights above being views of its row blocks.
  std::vector<torch::Tensor> expert_gate_up;
  // LoRA on the experts, as PEFT adapts transformers' fused expert tensors
  // (target_parameters): "gate_up" (gate and up as one: A (E*2r, C),
  // B (2Fm, E*2r)) and "down" (A (E*r, Fm), B (C, E*r)); expert e's pair
  // is A's rows e*R..e*R+R-1 and B's columns e, e+E, e+2E, ... (moe.h).
  std::map<std::string, LoraPair> expert_lora;
  std::map<std::string, LoraPair> lora;  // by target name
};

// Per-layer keys and values of the tokens seen so far, for sampling.
//
// Every row at the same position (`length`), or, with `lengths` set (one
// entry per row: batched decoding), each row at its own: a forward then
// continues the rows ForwardOptions::rows names, each from its own length,
// attends to that row's keys only, and advances those rows alone.
struct KVCache {
  std::vector<torch::Tensor> k;  // per layer (B, KV, capacity, D)
  std::vector<torch::Tensor> v;  // per layer (B, KV, capacity, D)
  int64_t length = 0;            // positions filled (every row alike)
  int64_t capacity = 0;
  std::vector<int64_t> lengths;  // per row, when rows differ ({} = `length` for all)
};

struct ForwardOptions {
  bool training = false;                  // enables LoRA dropout
  torch::Generator* generator = nullptr;  // for dropout masks; required when training
  bool last_only = false;                 // logits of the last position only
  // With a per-row cache (KVCache::lengths): the cache row that each row of
  // `ids` continues ({} = rows 0..B-1), and how many of each row's T ids are
  // real ({} = all): the rest is padding, whose keys land past the row's
  // length (never attended, overwritten later); the row advances by its
  // real count, and last_only takes its last real position.
  std::vector<int64_t> rows;
  std::vector<int64_t> valid;
  // Without a cache: packed rows (several sequences sharing a prefix in one
  // row). positions (B, T) int64 is each token's position (default 0..T-1);
  // attn_mask (B, T, T) float, 0 where query i may see key j and -inf
  // elsewhere (default causal). Both or neither.
  torch::Tensor positions;
  torch::Tensor attn_mask;
  // Without a cache: sequences packed end to end in one row (ids (1, N), N
  // the lengths' sum; a training micro-batch without padding). Positions
  // restart at 0 for each sequence and a token attends to the earlier tokens
  // of its own sequence only: the projections and the MLP run on the N real
  // tokens, attention on each sequence alone (no (N, N) mask). Every token
  // gets what a row of its own gives it, up to float rounding.
  std::vector<int64_t> seq_lens;
  // Without a cache: the positions whose hidden states the caller reads, as
  // flat indices into (B*T), int64 (a loss's target positions). The last
  // layer's output projection and MLP then run on those rows only (no other
  // position's state leaves that layer), and Hidden returns (1, M, C), row m
  // being position outputs[m]. Undefined = every position.
  torch::Tensor outputs;
  // When set, each mixture-of-experts layer appends the experts its router
  // picked, (tokens, K) int64 in the router's order (tests).
  std::vector<torch::Tensor>* expert_choices = nullptr;
  // Activation checkpointing (without a cache, under autograd): each layer
  // keeps only its input and computes its activations again in the
  // backward (layer_recompute.h). The same gradients, less memory, more time.
  bool checkpoint_layers = false;
};

class LlamaModel {
 public:
  LlamaConfig config;
  torch::Tensor embed;  // (V, C)
  std::vector<LlamaLayer> layers;
  torch::Tensor norm;     // (C)
  torch::Tensor lm_head;  // (V, C); the same tensor as embed when tied
  std::optional<LoraSpec> lora;
  // The LM head's LoRA pair when lora->targets has "lm_head": A (r, C),
  // B (V, r); it adapts the head only, never a tied embedding's input side.
  std::optional<LoraPair> head_lora;
  torch::Device device = torch::kCPU;
  // On CUDA: true runs the forward under bfloat16 autocast (matrix products
  // and attention in bfloat16, norms and the loss in float32); false keeps
  // float32 throughout (parity checks). The CPU always computes in float32.
  bool cuda_bf16 = true;

  // Random weights as Hugging Face initialises them (normal(0, std) for
  // matrices, ones for norms), from `seed`; made on the CPU from a CPU
  // generator, or where `where` says (a GPU model of billions of weights in
  // seconds, from that device's default generator seeded with `seed`).
  static LlamaModel Random(const LlamaConfig& config, uint64_t seed, double init_std = 0.02,
                           const torch::TensorOptions& where = {});

  // The LM head in effect: lm_head, plus B·A·scale with a head LoRA (an
  // autograd expression then, so gradients reach A and B).
  torch::Tensor HeadWeight() const;

  // Base weights with their Hugging Face names (lm_head left out when tied;
  // a MoE layer's experts one by one, under their checkpoints' names).
  NamedTensors BaseWeights() const;
  // Pointers to the base weight slots by Hugging Face name, for loaders
  // (a MoE layer's expert lists are sized here).
  std::vector<std::pair<std::string, torch::Tensor*>> BaseWeightSlots();
  // LoRA weights with their PEFT names
  // ("base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight").
  NamedTensors LoraWeights() const;
  std::vector<std::pair<std::string, torch::Tensor*>> LoraWeightSlots();

  // Adds zero-effect LoRA pairs (A kaiming-uniform as PEFT does, B zeros).
  void AddLora(const LoraSpec& spec, uint64_t seed);
  // Folds each B·A·scale into its base weight and drops the adapters (a
  // head LoRA unties a tied LM head from the embedding).
  void MergeLora();
  // Moves every tensor to `device` as float32.
  void To(torch::Device device);
  // Casts the base weights to `dtype` (bfloat16: a LoRA run's frozen base on
  // the GPU, half the memory, as PEFT keeps a bfloat16 model) and fuses the
  // projections that share an input (LlamaLayer::qkv_proj, gate_up_proj).
  // The adapters keep their float32; the base no longer trains.
  void FreezeBaseAs(torch::ScalarType dtype);
  // The opposite of the fusing: each projection a tensor of its own again,
  // the fused matrices dropped (a full fine-tune trains them one by one).
  void Unfuse();
  // Marks what trains: LoRA pairs only (base frozen) or every base weight.
  void SetTrainable(bool full);
  std::vector<torch::Tensor> TrainableParameters() const;

  KVCache NewCache(int64_t batch, int64_t capacity) const;

  // ids (B, T) int64 -> logits (B, T, V) float32, or (B, 1, V) with last_only.
  // With a cache, ids continue the cached sequence and the cache is extended.
  torch::Tensor Forward(const torch::Tensor& ids, KVCache* cache = nullptr,
                        const ForwardOptions& options = {}) const;
  // The same pass stopped before the LM head: final-normed hidden states
  // (B, T, C), or (1, M, C) with ForwardOptions::outputs. Losses that need
  // only a few positions apply the head there.
  torch::Tensor Hidden(const torch::Tensor& ids, KVCache* cache = nullptr,
                       const ForwardOptions& options = {}) const;
};

// Sum over positions of weight * -log p(target). logits (B, T, V) predict
// targets (B, T) int64; weights (B, T) float (0 where no loss).
torch::Tensor WeightedNllSum(const torch::Tensor& logits, const torch::Tensor& targets,
                             const torch::Tensor& weights);

// Log-probabilities of the targets at the positions whose weight is not 0,
// from hidden states (B, T, C): the LM head runs on those rows only, which
// for chat data (few assistant tokens) is most of the head's cost saved.
struct TargetLogProbs {
  torch::Tensor logp;     // (N) log p(target) at the selected positions
  torch::Tensor weights;  // (N)
  torch::Tensor rows;     // (N) int64 flat indices into (B*T)
  torch::Tensor hit;      // (N) bool: argmax == target (only when asked)
};
TargetLogProbs SelectedLogProbs(const LlamaModel& model, const torch::Tensor& hidden,
                                const torch::Tensor& targets, const torch::Tensor& weights,
                                bool with_hits = false);
// The same for given rows of hidden states (B, T, C) flattened to (B*T):
// log p(targets[i]) at flat row rows[i] (a row may repeat with another
// target); *hit, when given, whether each target is the argmax.
torch::Tensor RowTargetLogProbs(const LlamaModel& model, const torch::Tensor& hidden,
                                const torch::Tensor& rows, const torch::Tensor& targets,
                                torch::Tensor* hit = nullptr);

}  // namespace burst
