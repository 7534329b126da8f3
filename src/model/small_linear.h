// x W^T for the few rows of a decoding step, without OpenBLAS's packing.
//
// A decoding step multiplies one token per sequence (B = 1..32 rows) by
// every weight matrix. OpenBLAS (0.3.21) runs such a product through its
// general path, which first copies the whole weight into a packed buffer,
// transposing it for the x W^T layout torch::linear asks for (perf of the
// decoding bench: sgemm_incopy 23%, more than the multiply's 8%; prefill's
// products are in those figures too). SmallLinear instead reads W in place,
// once: each of its elements broadcast against up to 16 rows of x side by
// side in one vector register (AVX-512; 8 with AVX2), 8 of W's rows at a
// time, no copy of W.
//
// Each row's result depends on that row alone: every (row, output) pair
// takes the same float32 fused multiply-adds in the same order (k = 0, 1,
// ...), whatever the other rows, the vector width or the thread count.
// Decoded alone (fewer than kSmallLinearMinRows rows, through OpenBLAS) a
// sequence may round differently in the last bit.
//
// Thread-safety: stateless; runs on torch's intra-op threads.
#pragma once

#include <torch/torch.h>

namespace burst {

// Fewer rows than this go to OpenBLAS, whose own small-matrix kernel serves
// them better (one noisy timing on this project's VM: 1 row of 256 x 256 in
// 5.8 us there against 17 us here; from 4 rows this kernel was level or
// ahead on the 704- and 4096-wide products, from 6 on 256-wide ones too).
inline constexpr int64_t kSmallLinearMinRows = 4;
inline constexpr int64_t kSmallLinearMaxRows = 32;

// True when SmallLinear computes x2d W^T: no autograd recording (GradMode
// off), float32 CPU tensors, x2d (R, K) with kSmallLinearMinRows <= R <= kSmallLinearMaxRows,
// w (N, K) contiguous, and a CPU with AVX2 and FMA.
bool SmallLinearApplies(const torch::Tensor& x2d, const torch::Tensor& w);

// (R, N) = x2d W^T. Only where SmallLinearApplies.
torch::Tensor SmallLinear(const torch::Tensor& x2d, const torch::Tensor& w);

// While one is alive on a thread, the kernels chosen for forwards without
// autograd (SmallLinear, a mixture's one-token path) are not: the forward
// computes exactly what it computes under autograd. Activation
// checkpointing's forward (layer_recompute.h) holds one, so that the
// backward's recomputation gives the activations it replaces.
class AutogradKernelsGuard {
 public:
  AutogradKernelsGuard();
  ~AutogradKernelsGuard();
  AutogradKernelsGuard(const AutogradKernelsGuard&) = delete;
  AutogradKernelsGuard& operator=(const AutogradKernelsGuard&) = delete;

 private:
  bool before_;
};
// Whether a forward without autograd may take its own kernels: GradMode off
// and no AutogradKernelsGuard alive on this thread.
bool NoGradKernelsAllowed();

// x W^T for x (..., K): SmallLinear where it applies, else torch::linear.
torch::Tensor DecodeLinear(const torch::Tensor& x, const torch::Tensor& w, const torch::Tensor& bias = {});

namespace detail {
// SmallLinear with a chosen vector width: 16 (AVX-512) or 8 (AVX2), for tests.
torch::Tensor SmallLinearLanes(const torch::Tensor& x2d, const torch::Tensor& w, int lanes);
int SmallLinearWidestLanes();  // 16, 8, or 0 when the CPU has neither
}  // namespace detail

}  // namespace burst
