#include "model/small_linear.h"

#include <ATen/Parallel.h>
#include <immintrin.h>

#include <algorithm>
#include <vector>

#include "core/blas_core.h"

namespace burst {
namespace {

constexpr int64_t kBlock = 8;  // outputs computed together: 8 accumulators

// Rows 0..7 of y (R, N) at outputs o..o+7 from acc[0..7], acc[b]'s lanes
// being rows 0..7 of output o + b: an 8 x 8 transpose in registers, a row's
// 8 outputs stored together; rows at or past m not stored.
__attribute__((target("avx2,fma"))) inline void Store8x8(const __m256* acc, int64_t m, float* y, int64_t n) {
  const __m256 t0 = _mm256_unpacklo_ps(acc[0], acc[1]), t1 = _mm256_unpackhi_ps(acc[0], acc[1]);
  const __m256 t2 = _mm256_unpacklo_ps(acc[2], acc[3]), t3 = _mm256_unpackhi_ps(acc[2], acc[3]);
  const __m256 t4 = _mm256_unpacklo_ps(acc[4], acc[5]), t5 = _mm256_unpackhi_ps(acc[4], acc[5]);
  const __m256 t6 = _mm256_unpacklo_ps(acc[6], acc[7]), t7 = _mm256_unpackhi_ps(acc[6], acc[7]);
  const __m256 u0 = _mm256_shuffle_ps(t0, t2, _MM_SHUFFLE(1, 0, 1, 0));
  const __m256 u1 = _mm256_shuffle_ps(t0, t2, _MM_SHUFFLE(3, 2, 3, 2));
  const __m256 u2 = _mm256_shuffle_ps(t1, t3, _MM_SHUFFLE(1, 0, 1, 0));
  const __m256 u3 = _mm256_shuffle_ps(t1, t3, _MM_SHUFFLE(3, 2, 3, 2));
  const __m256 u4 = _mm256_shuffle_ps(t4, t6, _MM_SHUFFLE(1, 0, 1, 0));
  const __m256 u5 = _mm256_shuffle_ps(t4, t6, _MM_SHUFFLE(3, 2, 3, 2));
  const __m256 u6 = _mm256_shuffle_ps(t5, t7, _MM_SHUFFLE(1, 0, 1, 0));
  const __m256 u7 = _mm256_shuffle_ps(t5, t7, _MM_SHUFFLE(3, 2, 3, 2));
  const __m256 rows[8] = {_mm256_permute2f128_ps(u0, u4, 0x20), _mm256_permute2f128_ps(u1, u5, 0x20),
                          _mm256_permute2f128_ps(u2, u6, 0x20), _mm256_permute2f128_ps(u3, u7, 0x20),
                          _mm256_permute2f128_ps(u0, u4, 0x31), _mm256_permute2f128_ps(u1, u5, 0x31),
                          _mm256_permute2f128_ps(u2, u6, 0x31), _mm256_permute2f128_ps(u3, u7, 0x31)};
  for (int64_t i = 0; i < std::min<int64_t>(m, 8); ++i) _mm256_storeu_ps(y + i * n, rows[i]);
}

// y (R, N) rows 0..m-1, outputs o0..o1 = W (N, K) rows o0..o1 times xt (K,
// 16), xt's lane i being row i of x: each of W's elements broadcast against
// 16 rows side by side, k in order.
__attribute__((target("avx512f"))) void Rows16(const float* xt, const float* w, int64_t k, int64_t o0,
                                               int64_t o1, float* y, int64_t n, int64_t m) {
  int64_t o = o0;
  for (; o + kBlock <= o1; o += kBlock) {
    __m512 acc[kBlock];
    for (auto& a : acc) a = _mm512_setzero_ps();
    const float* wo = w + o * k;
    // The next block's 8 rows (8k floats just after these) on their way in:
    // one line every other k.
    const char* next = o + 2 * kBlock <= o1 ? reinterpret_cast<const char*>(wo + kBlock * k) : nullptr;
    int64_t j = 0;
    if (next) {
      for (; j + 2 <= k; j += 2) {
        _mm_prefetch(next + j * 16, _MM_HINT_T0);
        const __m512 x0 = _mm512_loadu_ps(xt + j * 16), x1 = _mm512_loadu_ps(xt + j * 16 + 16);
        for (int64_t i = 0; i < kBlock; ++i)
          acc[i] = _mm512_fmadd_ps(_mm512_set1_ps(wo[i * k + j]), x0, acc[i]);
        for (int64_t i = 0; i < kBlock; ++i)
          acc[i] = _mm512_fmadd_ps(_mm512_set1_ps(wo[i * k + j + 1]), x1, acc[i]);
      }
    }
    for (; j < k; ++j) {
      const __m512 xv = _mm512_loadu_ps(xt + j * 16);
      for (int64_t i = 0; i < kBlock; ++i)
        acc[i] = _mm512_fmadd_ps(_mm512_set1_ps(wo[i * k + j]), xv, acc[i]);
    }
    // Rows 0..7 and 8..15: the lower and upper halves of each accumulator.
    alignas(64) float lanes[kBlock][16];
    for (int64_t i = 0; i < kBlock; ++i) _mm512_store_ps(lanes[i], acc[i]);
    __m256 half[kBlock];
    for (int64_t i = 0; i < kBlock; ++i) half[i] = _mm256_load_ps(lanes[i]);
    Store8x8(half, m, y + o, n);
    if (m > 8) {
      for (int64_t i = 0; i < kBlock; ++i) half[i] = _mm256_load_ps(lanes[i] + 8);
      Store8x8(half, m - 8, y + 8 * n + o, n);
    }
  }
  for (; o < o1; ++o) {
    __m512 acc = _mm512_setzero_ps();
    const float* wo = w + o * k;
    for (int64_t j = 0; j < k; ++j)
      acc = _mm512_fmadd_ps(_mm512_set1_ps(wo[j]), _mm512_loadu_ps(xt + j * 16), acc);
    alignas(64) float lanes[16];
    _mm512_store_ps(lanes, acc);
    for (int64_t i = 0; i < m; ++i) y[i * n + o] = lanes[i];
  }
}

// The same with 8 lanes (AVX2): lane for lane the same operations. (A copy
// of Rows16 with the 256-bit intrinsics: each needs its own target.)
__attribute__((target("avx2,fma"))) void Rows8(const float* xt, const float* w, int64_t k, int64_t o0,
                                               int64_t o1, float* y, int64_t n, int64_t m) {
  int64_t o = o0;
  for (; o + kBlock <= o1; o += kBlock) {
    __m256 acc[kBlock];
    for (auto& a : acc) a = _mm256_setzero_ps();
    const float* wo = w + o * k;
    for (int64_t j = 0; j < k; ++j) {
      const __m256 xv = _mm256_loadu_ps(xt + j * 8);
      for (int64_t i = 0; i < kBlock; ++i)
        acc[i] = _mm256_fmadd_ps(_mm256_set1_ps(wo[i * k + j]), xv, acc[i]);
    }
    Store8x8(acc, m, y + o, n);
  }
  for (; o < o1; ++o) {
    __m256 acc = _mm256_setzero_ps();
    const float* wo = w + o * k;
    for (int64_t j = 0; j < k; ++j)
      acc = _mm256_fmadd_ps(_mm256_set1_ps(wo[j]), _mm256_loadu_ps(xt + j * 8), acc);
    alignas(32) float lanes[8];
    _mm256_store_ps(lanes, acc);
    for (int64_t i = 0; i < m; ++i) y[i * n + o] = lanes[i];
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
  std::vector<float> xt(static_cast<size_t>(k * lanes));
  for (int64_t r0 = 0; r0 < r; r0 += lanes) {
    const int64_t m = std::min<int64_t>(lanes, r - r0);
    // x's rows r0.. side by side: xt[j * lanes + i] = x[r0 + i, j], unused lanes 0.
    if (m < lanes) std::fill(xt.begin(), xt.end(), 0.0f);
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t j = 0; j < k; ++j) xt[static_cast<size_t>(j * lanes + i)] = xp[(r0 + i) * k + j];
    }
    // Threads split the outputs, never a row's sum.
    const int64_t blocks = (n + kBlock - 1) / kBlock;
    float* yr = yp + r0 * n;
    at::parallel_for(0, blocks, 8, [&](int64_t b0, int64_t b1) {
      const int64_t o0 = b0 * kBlock, o1 = std::min(n, b1 * kBlock);
      if (lanes == 16) {
        Rows16(xt.data(), wp, k, o0, o1, yr, n, m);
      } else {
        Rows8(xt.data(), wp, k, o0, o1, yr, n, m);
      }
    });
  }
  return y;
}

}  // namespace detail

bool SmallLinearApplies(const torch::Tensor& x2d, const torch::Tensor& w) {
  return NoGradKernelsAllowed() && detail::SmallLinearWidestLanes() > 0 && x2d.dim() == 2 && w.dim() == 2 &&
         x2d.size(0) >= kSmallLinearMinRows && x2d.size(0) <= kSmallLinearMaxRows &&
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

namespace {
thread_local bool autograd_kernels = false;
}  // namespace

AutogradKernelsGuard::AutogradKernelsGuard() : before_(autograd_kernels) { autograd_kernels = true; }
AutogradKernelsGuard::~AutogradKernelsGuard() { autograd_kernels = before_; }

bool NoGradKernelsAllowed() { return !torch::GradMode::is_enabled() && !autograd_kernels; }

}  // namespace burst
