// Rotary position embeddings as transformers computes them: the inverse
// frequencies of a model's rope_theta and head_dim with its rope_scaling
// (none, linear, llama3, yarn; config.h checks the type), YaRN's factor on
// cos and sin, and the tables for given positions.
//
// Thread-safety: InvFreq keeps a cache under a lock of its own; the rest
// are pure functions.
#pragma once

#include <torch/torch.h>

#include <utility>

#include "model/config.h"

namespace burst {

// The inverse frequencies (D/2) on `device`, computed once per rotary
// setting and device (a decoding step on the GPU would otherwise spend a
// dozen small kernels and a host-to-device copy on it per token). Never
// written.
torch::Tensor InvFreq(const LlamaConfig& c, torch::Device device);
// What scales cos and sin (YaRN's attention factor; 1 otherwise).
double RopeAttentionFactor(const LlamaConfig& c);
// Tables for per-row positions qpos (B, T) int64: cos and sin (B, 1, T, D),
// the attention factor applied.
std::pair<torch::Tensor, torch::Tensor> RowRotary(const LlamaConfig& c, const torch::Tensor& qpos,
                                                  torch::Device device);
// HF's rotate_half: (x1, x2) -> (-x2, x1) over the last dimension's halves.
torch::Tensor RotateHalf(const torch::Tensor& x);

}  // namespace burst
