#include "model/small_linear.h"

#include <ATen/Parallel.h>
#include <immintrin.h>

#include <algorithm>
#include <vector>

#include "core/blas_core.h"

namespace burst {
namespace {

constexpr int64_t kBlock = 8;  // outputs computed together: 8 accumulators

// yt (N, 16) rows o0..o1 = W (N, K) rows o0..o1 times xt (K, 16): each of W's
// elements broadcast against 16 rows of x side by side, k in order.
__attribute__((target("avx512f"))) void Rows16(const float* xt, const float* w, int64_t k, int64_t o0,
                                               int64_t o1, float* yt) {
  int64_t o = o0;
  for (; o + kBlock <= o1; o += kBlock) {
    __m512 acc[kBlock];
    for (auto& a : acc) a = _mm512_setzero_ps();
    const float* wo = w + o * k;
    for (int64_t j = 0; j < k; ++j) {
      const __m512 xv = _mm512_loadu_ps(xt + j * 16);
      for (int64_t i = 0; i < kBlock; ++i) acc[i] = _mm512_fmadd_ps(_mm512_set1_ps(wo[i * k + j]), xv, acc[i]);
    }
    for (int64_t i = 0; i < kBlock; ++i) _mm512_storeu_ps(yt + (o + i) * 16, acc[i]);
  }
  for (; o < o1; ++o) {
    __m512 acc = _mm512_setzero_ps();
    const float* wo = w + o * k;
    for (int64_t j = 0; j < k; ++j) acc = _mm512_fmadd_ps(_mm512_set1_ps(wo[j]), _mm512_loadu_ps(xt + j * 16), acc);
    _mm512_storeu_ps(yt + o * 16, acc);
  }
}

// The same with 8 lanes (AVX2): lane for lane the same operations. (A copy
// of Rows16 with the 256-bit intrinsics: each needs its own target.)
__attribute__((target("avx2,fma"))) void Rows8(const float* xt, const float* w, int64_t k, int64_t o0, int64_t o1,
                                               float* yt) {
  int64_t o = o0;
  for (; o + kBlock <= o1; o += kBlock) {
    __m256 acc[kBlock];
    for (auto& a : acc) a = _mm256_setzero_ps();
    const float* wo = w + o * k;
    for (int64_t j = 0; j < k; ++j) {
      const __m256 xv = _mm256_loadu_ps(xt + j * 8);
      for (int64_t i = 0; i < kBlock; ++i) acc[i] = _mm256_fmadd_ps(_mm256_set1_ps(wo[i * k + j]), xv, acc[i]);
    }
    for (int64_t i = 0; i < kBlock; ++i) _mm256_storeu_ps(yt + (o + i) * 8, acc[i]);
  }
  for (; o < o1; ++o) {
    __m256 acc = _mm256_setzero_ps();
    const float* wo = w + o * k;
    for (int64_t j = 0; j < k; ++j) acc = _mm256_fmadd_ps(_mm256_set1_ps(wo[j]), _mm256_loadu_ps(xt + j * 8), acc);
    _mm256_storeu_ps(yt + o * 8, acc);
  }
}

int WidestLanes() {
  const CpuVectorUnits u = HostVectorUnits();
  if (u.avx512) return 16;
  return u.avx2_fma ? 8 : 0;
}

}  // namespace

namespace detail {

int SmallLinearWidestLanes() {
  static const int lanes = WidestLanes();
  return lanes;
}

torch::Tensor SmallLinearLanes(const torch::Tensor& x2d, const torch::Tensor& w, int lanes) {
  const torch::Tensor x = x2d.contiguous();
  const int64_t r = x.size(0), k = x.size(1), n = w.size(0);
  torch::Tensor y = torch::empty({r, n}, x.options());  // (R, N)
  const float* xp = x.data_ptr<float>();
  const float* wp = w.data_ptr<float>();
  float* yp = y.data_ptr<float>();
  std::vector<float> xt(static_cast<size_t>(k * lanes)), yt(static_cast<size_t>(n * lanes));
  for (int64_t r0 = 0; r0 < r; r0 += lanes) {
    const int64_t m = std::min<int64_t>(lanes, r - r0);
    // x's rows r0.. side by side: xt[j * lanes + i] = x[r0 + i, j], unused lanes 0.
    std::fill(xt.begin(), xt.end(), 0.0f);
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t j = 0; j < k; ++j) xt[static_cast<size_t>(j * lanes + i)] = xp[(r0 + i) * k + j];
    }
    // Threads split the outputs, never a row's sum.
    const int64_t blocks = (n + kBlock - 1) / kBlock;
    at::parallel_for(0, blocks, 8, [&](int64_t b0, int64_t b1) {
      const int64_t o0 = b0 * kBlock, o1 = std::min(n, b1 * kBlock);
      if (lanes == 16) {
        Rows16(xt.data(), wp, k, o0, o1, yt.data());
      } else {
        Rows8(xt.data(), wp, k, o0, o1, yt.data());
      }
    });
    for (int64_t o = 0; o < n; ++o) {
      for (int64_t i = 0; i < m; ++i) yp[(r0 + i) * n + o] = yt[static_cast<size_t>(o * lanes + i)];
    }
  }
  return y;
}

}  // namespace detail

bool SmallLinearApplies(const torch::Tensor& x2d, const torch::Tensor& w) {
  return !torch::GradMode::is_enabled() && detail::SmallLinearWidestLanes() > 0 && x2d.dim() == 2 &&
         w.dim() == 2 && x2d.size(0) >= kSmallLinearMinRows && x2d.size(0) <= kSmallLinearMaxRows &&
         x2d.size(1) == w.size(1) && x2d.device().is_cpu() && w.device().is_cpu() &&
         x2d.scalar_type() == torch::kFloat32 && w.scalar_type() == torch::kFloat32 && w.is_contiguous();
}

torch::Tensor SmallLinear(const torch::Tensor& x2d, const torch::Tensor& w) {
  // 8 lanes for 8 rows or fewer: the same results, half the wasted lanes.
  const int widest = detail::SmallLinearWidestLanes();
  return detail::SmallLinearLanes(x2d, w, x2d.size(0) <= 8 ? 8 : widest);
}

torch::Tensor DecodeLinear(const torch::Tensor& x, const torch::Tensor& w, const torch::Tensor& bias) {
  const torch::Tensor x2d = x.dim() == 2 ? x : x.reshape({-1, x.size(-1)});
  if (!SmallLinearApplies(x2d, w)) return torch::linear(x, w, bias);
  std::vector<int64_t> shape = x.sizes().vec();
  shape.back() = w.size(0);
  torch::Tensor y = SmallLinear(x2d, w).view(shape);
  return bias.defined() ? y + bias : y;
}

}  // namespace burst
