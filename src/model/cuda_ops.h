// The forward's two GPU-only pieces:
//
// - CudaAutocast: bfloat16 autocast on CUDA for a scope. Leaving the scope
//   restores the previous state and, when autocast ends, clears its cache of
//   casts of weights (as Python's torch.autocast does on exit): a cached
//   bfloat16 copy of a weight that the optimizer then updates in place would
//   be stale.
// - Sdpa: at::scaled_dot_product_attention, which picks flash or
//   memory-efficient attention on the GPU.
#pragma once

#include <ATen/autocast_mode.h>
#include <torch/torch.h>

namespace burst {

class CudaAutocast {
 public:
  explicit CudaAutocast(bool on) : active_(on) {
    if (!active_) return;
    was_enabled_ = at::autocast::is_autocast_enabled(at::kCUDA);
    was_dtype_ = at::autocast::get_autocast_dtype(at::kCUDA);
    at::autocast::set_autocast_enabled(at::kCUDA, true);
    at::autocast::set_autocast_dtype(at::kCUDA, at::kBFloat16);
  }
  ~CudaAutocast() {
    if (!active_) return;
    at::autocast::set_autocast_enabled(at::kCUDA, was_enabled_);
    at::autocast::set_autocast_dtype(at::kCUDA, was_dtype_);
    if (!was_enabled_) at::autocast::clear_cache();
  }
  CudaAutocast(const CudaAutocast&) = delete;
  CudaAutocast& operator=(const CudaAutocast&) = delete;

 private:
  bool active_;
  bool was_enabled_ = false;
  at::ScalarType was_dtype_ = at::kBFloat16;
};

// Attention of q (B, H, T, D) over k, v (B, KV, S, D), H a multiple of KV
// (grouped-query heads h = g*R + j share key head g, as Hugging Face's
// repeat_kv orders them): causal (query i sees keys 0..i, S == T) or, with
// causal false, every key. Returns (B, H, T, D).
inline torch::Tensor Sdpa(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v, bool causal,
                          double scale) {
  return at::scaled_dot_product_attention(q, k, v, /*attn_mask=*/{}, /*dropout_p=*/0.0, causal, scale,
                                          /*enable_gqa=*/q.size(1) != k.size(1));
}

}  // namespace burst
