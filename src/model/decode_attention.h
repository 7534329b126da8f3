// DecodeAttention: one decoding step's attention on the CPU, fused.
//
// In a decoding step every row of a batch adds one token at its own
// position (BatchDecoder). The general path (llama.cpp) writes the new keys
// and values into the cache, gathers the rows' caches padded to the longest
// row, masks the padding and runs two batched matrix products: about twenty
// tensor operations a layer, each a pass over memory, for tiny products
// (B x KV of them, each R x D by D x S). This does the same work in three:
// rotary on the query and the new key, the new key and value written into
// the row's cache slot, and each query head's scores over that row's own
// keys (no padding, no copy of the cache) in one loop; one softmax; the
// weighted sum of the values in another. Same arithmetic as the general
// path up to float rounding (sums in another order).
//
// Thread-safety: writes only the given cache rows. Errors: kInternal for
// shapes that do not fit (a caller's bug).
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <vector>

namespace burst {

struct DecodeAttentionInput {
  // The step's projections, one row per sequence: q (B, H*D), k and v
  // (B, KV*D), float32, each row's last dimension contiguous (views into one
  // fused projection are fine).
  torch::Tensor q, k, v;
  // Rotary tables at each row's position, (B, D) float32.
  torch::Tensor cos, sin;
  // The layer's cache, (rows, KV, capacity, D) float32 contiguous.
  torch::Tensor* cache_k = nullptr;
  torch::Tensor* cache_v = nullptr;
  // Row i continues cache row rows[i], whose keys fill positions
  // 0..starts[i]-1; its new key goes to position starts[i].
  const std::vector<int64_t>* rows = nullptr;
  const std::vector<int64_t>* starts = nullptr;
  int64_t heads = 0, kv_heads = 0, head_dim = 0;
  double scale = 1.0;  // applied to the scores (1 / sqrt(D))
};

// Whether the fused step serves a forward of T new positions on this
// cache: CPU, float32, T = 1, no autograd.
bool DecodeAttentionApplies(const torch::Tensor& cache_k, int64_t t);

// The attention output (B, H*D) float32; the cache rows get the new keys
// and values (their lengths are the caller's to advance).
torch::Tensor DecodeAttention(const DecodeAttentionInput& in);

}  // namespace burst
