// The differences between the libtorch versions Burst builds against, in one
// place: Debian 12's libtorch 1.13 (CPU) and PyTorch 2.x (CUDA, the GPU
// machine of scripts/gpu-check.sh).
//
// - CudaAutocast: bfloat16 autocast on CUDA for a scope. 2.4 moved the
//   switches to per-device calls (set_autocast_enabled(kCUDA, ...)); 1.13
//   has set_enabled / set_autocast_gpu_dtype. Leaving the scope restores the
//   previous state and, when autocast ends, clears its cache of casts of
//   weights (as Python's torch.autocast does on exit): a cached bfloat16
//   copy of a weight that the optimizer then updates in place would be stale.
// - kHasSdpa / Sdpa: at::scaled_dot_product_attention (2.0+; its `scale`
//   argument 2.1+, `enable_gqa` 2.5+), which picks flash or memory-efficient
//   attention on the GPU.
#pragma once

#include <ATen/autocast_mode.h>
#include <torch/torch.h>

#include <optional>

namespace burst {

#define BURST_TORCH_AT_LEAST(major, minor) \
  (TORCH_VERSION_MAJOR > (major) || (TORCH_VERSION_MAJOR == (major) && TORCH_VERSION_MINOR >= (minor)))

class CudaAutocast {
 public:
  explicit CudaAutocast(bool on) : active_(on) {
    if (!active_) return;
#if BURST_TORCH_AT_LEAST(2, 4)
    was_enabled_ = at::autocast::is_autocast_enabled(at::kCUDA);
    was_dtype_ = at::autocast::get_autocast_dtype(at::kCUDA);
    at::autocast::set_autocast_enabled(at::kCUDA, true);
    at::autocast::set_autocast_dtype(at::kCUDA, at::kBFloat16);
#else
    was_enabled_ = at::autocast::is_enabled();
    was_dtype_ = at::autocast::get_autocast_gpu_dtype();
    at::autocast::set_enabled(true);
    at::autocast::set_autocast_gpu_dtype(at::kBFloat16);
#endif
  }
  ~CudaAutocast() {
    if (!active_) return;
#if BURST_TORCH_AT_LEAST(2, 4)
    at::autocast::set_autocast_enabled(at::kCUDA, was_enabled_);
    at::autocast::set_autocast_dtype(at::kCUDA, was_dtype_);
#else
    at::autocast::set_enabled(was_enabled_);
    at::autocast::set_autocast_gpu_dtype(was_dtype_);
#endif
    if (!was_enabled_) at::autocast::clear_cache();
  }
  CudaAutocast(const CudaAutocast&) = delete;
  CudaAutocast& operator=(const CudaAutocast&) = delete;

 private:
  bool active_;
  bool was_enabled_ = false;
  at::ScalarType was_dtype_ = at::kBFloat16;
};

#if BURST_TORCH_AT_LEAST(2, 1)
inline constexpr bool kHasSdpa = true;
#else
inline constexpr bool kHasSdpa = false;
#endif

// Attention of q (B, H, T, D) over k, v (B, KV, S, D), H a multiple of KV
// (grouped-query heads h = g*R + j share key head g, as Hugging Face's
// repeat_kv orders them): causal (query i sees keys 0..i, S == T) or, with
// causal false, every key. Returns (B, H, T, D). Only where kHasSdpa.
inline torch::Tensor Sdpa(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v, bool causal,
                          double scale) {
#if BURST_TORCH_AT_LEAST(2, 5)
  return at::scaled_dot_product_attention(q, k, v, /*attn_mask=*/{}, /*dropout_p=*/0.0, causal, scale,
                                          /*enable_gqa=*/q.size(1) != k.size(1));
#elif BURST_TORCH_AT_LEAST(2, 1)
  const int64_t r = q.size(1) / k.size(1);
  torch::Tensor kk = r == 1 ? k : k.repeat_interleave(r, 1);
  torch::Tensor vv = r == 1 ? v : v.repeat_interleave(r, 1);
  return at::scaled_dot_product_attention(q, kk, vv, /*attn_mask=*/{}, /*dropout_p=*/0.0, causal, scale);
#else
  (void)q, (void)k, (void)v, (void)causal, (void)scale;
  TORCH_CHECK(false, "scaled_dot_product_attention needs libtorch 2.1 or newer");
#endif
}

}  // namespace burst
