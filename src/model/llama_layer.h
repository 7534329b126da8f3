// One decoder layer, for LlamaModel::Hidden (llama.cpp) and the
// activation checkpointing that runs it again (layer_recompute.h).
//
// Thread-safety: pure functions of their arguments, except that a layer
// writes its keys and values into the cache it is given.
#pragma once

#include <torch/torch.h>

#include <vector>

#include "model/llama.h"

namespace burst {

// What every layer of one forward shares: the shapes, the attention path
// Hidden chose, and the rotary tables and masks it built.
struct LayerInputs {
  int64_t b = 0, t = 0;     // batch, new positions
  int64_t s = 0, past = 0;  // key positions, cached positions before these
  bool ragged = false;      // a per-row cache (KVCache::lengths)
  bool packed = false;      // positions and attn_mask given
  bool varlen = false;      // sequences end to end (ForwardOptions::seq_lens)
  bool varlen_kernel = false, fused_decode = false, sdpa = false, in_place = false;
  bool some_outputs = false;  // ForwardOptions::outputs
  int64_t nseq = 0, lmax = 0;
  double att_scale = 1.0;
  std::vector<int64_t> rows, starts;  // ragged: the cache rows, their lengths
  torch::Tensor cos, sin, cos_local, sin_local;
  torch::Tensor mask, row_index, write_pos;
  torch::Tensor varlen_slots, varlen_back;
};

// The model's RMSNorm: Gemma's scales by (1 + w), the others' by w.
torch::Tensor Norm(const torch::Tensor& x, const torch::Tensor& weight, const LlamaConfig& c);

// Layer `li` of `m` on x (B, T, C) -> (B, T, C) (with outputs, the last
// layer returns (1, M, C)).
torch::Tensor LayerForward(const LlamaModel& m, size_t li, torch::Tensor x, const LayerInputs& in,
                           KVCache* cache, const ForwardOptions& opt);

}  // namespace burst
