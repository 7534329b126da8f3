#include "model/varlen_attention.h"

#include <ATen/Parallel.h>
#include <immintrin.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <limits>
#include <numeric>
#include <string>

#include "core/blas_core.h"
#include "core/status.h"
#include "model/attention_kernels.h"
#include "model/simd_clones.h"

namespace burst {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::tensor_list;

constexpr int64_t kBlock = 32;  // queries per block
constexpr int kLanes = 16;      // partial maxima and sums, in a fixed order

// e^x for x <= 0 (a softmax's scores less their maximum; below -87, e^-87):
// 2^k e^f with k = round(x log2 e) and f = x - k ln 2 in [-ln2/2, ln2/2],
// e^f by its degree-7 Taylor polynomial (truncation < 6e-9 relative). Plain
// arithmetic, so the loops around it vectorise.
__attribute__((always_inline)) inline float ExpNonPositive(float x) {
  constexpr float kLog2e = 1.44269504088896341f;
  constexpr float kLn2Hi = 0.693359375f, kLn2Lo = -2.12194440e-4f;
  constexpr float kRound = 12582912.0f;  // 1.5 * 2^23: adding it rounds to an integer
  x = x < -87.0f ? -87.0f : x;
  const float kf = (x * kLog2e + kRound) - kRound;
  const float f = (x - kf * kLn2Hi) - kf * kLn2Lo;
  float p = 1.0f / 5040.0f;
  p = p * f + 1.0f / 720.0f;
  p = p * f + 1.0f / 120.0f;
  p = p * f + 1.0f / 24.0f;
  p = p * f + 1.0f / 6.0f;
  p = p * f + 0.5f;
  p = p * f + 1.0f;
  p = p * f + 1.0f;
  const int32_t bits = (static_cast<int32_t>(kf) + 127) << 23;
  float two_k;
  std::memcpy(&two_k, &bits, sizeof two_k);
  return p * two_k;
}

BURST_SIMD_CLONES float RowMax(const float* x, int64_t n) {
  float m[kLanes];
  for (int l = 0; l < kLanes; ++l) m[l] = -std::numeric_limits<float>::infinity();
  int64_t s = 0;
  for (; s + kLanes <= n; s += kLanes)
    for (int l = 0; l < kLanes; ++l) m[l] = m[l] > x[s + l] ? m[l] : x[s + l];
  float out = -std::numeric_limits<float>::infinity();
  for (int l = 0; l < kLanes; ++l) out = out > m[l] ? out : m[l];
  for (; s < n; ++s) out = out > x[s] ? out : x[s];
  return out;
}

// The end of ExpShifted's both forms: the lanes' partial sums in order, then
// the keys s..n-1 that fill no whole block.
inline float SumLanesAndTail(const float* acc, float* x, int64_t s, int64_t n, float m) {
  float sum = 0.0f;
  for (int l = 0; l < kLanes; ++l) sum += acc[l];
  for (; s < n; ++s) {
    x[s] = ExpNonPositive(x[s] - m);
    sum += x[s];
  }
  return sum;
}

// x[s] = e^(x[s] - m) for s < n; returns their sum.
BURST_SIMD_CLONES float ExpShifted(float* x, int64_t n, float m) {
  float acc[kLanes];
  for (int l = 0; l < kLanes; ++l) acc[l] = 0.0f;
  int64_t s = 0;
  for (; s + kLanes <= n; s += kLanes) {
    for (int l = 0; l < kLanes; ++l) {
      const float e = ExpNonPositive(x[s + l] - m);
      x[s + l] = e;
      acc[l] += e;
    }
  }
  return SumLanesAndTail(acc, x, s, n, m);
}

#if defined(__x86_64__) && defined(__GNUC__)
// ExpShifted on AVX2 + FMA, where the compiler's AVX2 clone has no fused
// multiply-adds for the polynomial: the same lanes and order of the sum (two
// registers of 8 for the 16 lanes), ExpNonPositive's steps fused.
// ExpNonPositive(v - m) in 8 lanes, its steps fused.
__attribute__((target("avx2,fma"))) inline __m256 Exp8(__m256 v, __m256 shift) {
  const __m256 round = _mm256_set1_ps(12582912.0f);
  v = _mm256_max_ps(_mm256_sub_ps(v, shift), _mm256_set1_ps(-87.0f));
  const __m256 kf = _mm256_sub_ps(_mm256_fmadd_ps(v, _mm256_set1_ps(1.44269504088896341f), round), round);
  const __m256 f = _mm256_fnmadd_ps(kf, _mm256_set1_ps(-2.12194440e-4f),
                                    _mm256_fnmadd_ps(kf, _mm256_set1_ps(0.693359375f), v));
  static constexpr float kCoef[] = {1.0f / 5040.0f, 1.0f / 720.0f, 1.0f / 120.0f, 1.0f / 24.0f,
                                    1.0f / 6.0f,    0.5f,          1.0f,          1.0f};
  __m256 p = _mm256_set1_ps(kCoef[0]);
  for (int c = 1; c < 8; ++c) p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(kCoef[c]));
  const __m256i bits =
      _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(kf), _mm256_set1_epi32(127)), 23);
  return _mm256_mul_ps(p, _mm256_castsi256_ps(bits));
}

__attribute__((target("avx2,fma"))) float ExpShiftedAvx2(float* x, int64_t n, float m) {
  const __m256 shift = _mm256_set1_ps(m);
  __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
  int64_t s = 0;
  for (; s + kLanes <= n; s += kLanes) {
    const __m256 e0 = Exp8(_mm256_loadu_ps(x + s), shift), e1 = Exp8(_mm256_loadu_ps(x + s + 8), shift);
    _mm256_storeu_ps(x + s, e0);
    _mm256_storeu_ps(x + s + 8, e1);
    acc0 = _mm256_add_ps(acc0, e0);
    acc1 = _mm256_add_ps(acc1, e1);
  }
  float acc[kLanes];
  _mm256_storeu_ps(acc, acc0);
  _mm256_storeu_ps(acc + 8, acc1);
  return SumLanesAndTail(acc, x, s, n, m);
}
#endif

// ExpShifted as fast as the CPU allows.
float ExpShiftedFast(float* x, int64_t n, float m) {
#if defined(__x86_64__) && defined(__GNUC__)
  static const bool avx2_only = [] {
    const CpuVectorUnits u = HostVectorUnits();
    return u.avx2_fma && !u.avx512;
  }();
  if (avx2_only) return ExpShiftedAvx2(x, n, m);
#endif
  return ExpShifted(x, n, m);
}

BURST_SIMD_CLONES void ScaleRow(float* x, int64_t n, float w) {
  for (int64_t s = 0; s < n; ++s) x[s] *= w;
}

BURST_SIMD_CLONES void AddTo(float* dst, const float* src, int64_t n) {
  for (int64_t i = 0; i < n; ++i) dst[i] += src[i];
}

// dS = P (dP - delta) scale over the n keys a query sees.
BURST_SIMD_CLONES void ScoreGrad(const float* p, float* dp, int64_t n, float delta, float scale) {
  for (int64_t s = 0; s < n; ++s) dp[s] = p[s] * (dp[s] - delta) * scale;
}

BURST_SIMD_CLONES float Dot(const float* a, const float* b, int64_t n) {
  float acc[kLanes];
  for (int l = 0; l < kLanes; ++l) acc[l] = 0.0f;
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    for (int l = 0; l < kLanes; ++l) acc[l] += a[i + l] * b[i + l];
  float sum = 0.0f;
  for (int l = 0; l < kLanes; ++l) sum += acc[l];
  for (; i < n; ++i) sum += a[i] * b[i];
  return sum;
}

// out (cols x rows) = in (rows x cols, leading dimension ld) transposed.
void Transpose(const float* in, int64_t rows, int64_t cols, int64_t ld, float* out) {
  for (int64_t a = 0; a < rows; ++a)
    for (int64_t s = 0; s < cols; ++s) out[s * rows + a] = in[a * ld + s];
}

// The layout of one call: per-head tensors (heads, N, D) contiguous.
struct Layout {
  int64_t n = 0, h = 0, kv = 0, r = 0, d = 0;
  float scale = 1.0f;
  std::vector<int64_t> starts, lens;
  std::vector<int64_t> order;  // tasks (sequence * kv + key head), longest sequence first
  int64_t longest = 0;
};

Layout MakeLayout(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                  const std::vector<int64_t>& seq_lens, double scale) {
  auto fail = [](const std::string& what) { throw Error(Code::kInternal, "varlen attention: " + what); };
  if (q.dim() != 3 || k.dim() != 3 || v.dim() != 3) fail("q, k and v must be (heads, N, D)");
  if (!VarlenAttentionApplies(q) || !VarlenAttentionApplies(k) || !VarlenAttentionApplies(v)) {
    fail("q, k and v must be float32 on the CPU");
  }
  Layout l;
  l.h = q.size(0);
  l.n = q.size(1);
  l.d = q.size(2);
  l.kv = k.size(0);
  if (l.kv < 1 || l.h % l.kv != 0) fail("query heads must be a multiple of key heads");
  if (k.sizes() != v.sizes() || k.size(1) != l.n || k.size(2) != l.d) fail("k and v must be (KV, N, D) as q");
  l.r = l.h / l.kv;
  l.scale = static_cast<float>(scale);
  int64_t at = 0;
  for (int64_t len : seq_lens) {
    if (len < 1) fail("a sequence of " + std::to_string(len) + " tokens");
    l.starts.push_back(at);
    l.lens.push_back(len);
    at += len;
    l.longest = std::max(l.longest, len);
  }
  if (at != l.n) fail("sequence lengths sum to " + std::to_string(at) + ", not " + std::to_string(l.n));
  const int64_t tasks = static_cast<int64_t>(seq_lens.size()) * l.kv;
  l.order.resize(static_cast<size_t>(tasks));
  std::iota(l.order.begin(), l.order.end(), 0);
  std::stable_sort(l.order.begin(), l.order.end(), [&](int64_t a, int64_t b) {
    return l.lens[static_cast<size_t>(a / l.kv)] > l.lens[static_cast<size_t>(b / l.kv)];
  });
  return l;
}

// A thread's scratch, sized for the longest sequence.
struct Buffers {
  std::vector<float> kt, vt, p, dp, t, tmp;
};

// Runs fn(task, buffers) for every task, the threads taking the next
// undone task (longest first) as they free up.
template <typename Fn>
void ForEachTask(const Layout& l, Fn fn) {
  std::atomic<size_t> next{0};
  const int64_t threads = std::min<int64_t>(at::get_num_threads(), static_cast<int64_t>(l.order.size()));
  at::parallel_for(0, std::max<int64_t>(1, threads), 1, [&](int64_t lo, int64_t hi) {
    Buffers b;
    const size_t m = static_cast<size_t>(l.longest);
    const size_t d = static_cast<size_t>(l.d);
    b.kt.resize(d * m);
    b.vt.resize(d * m);
    b.p.resize(kBlock * m);
    b.dp.resize(kBlock * m);
    b.t.resize(m * kBlock);
    b.tmp.resize(m * d);
    (void)lo, (void)hi;  // one call per thread: each takes tasks until none is left
    for (size_t i = next++; i < l.order.size(); i = next++) fn(l.order[i], b);
  });
}

// The softmax'd scores of queries [i0, i1) (rows of D at q) over keys
// 0..i1-1 (kt: (D, ld)) into p (leading dimension ld): row a over keys
// 0..i0+a, zero beyond.
void Probabilities(const Layout& l, const float* q, int64_t i0, int64_t i1, const float* kt, int64_t ld,
                   float* p) {
  const int64_t rows = i1 - i0;
  detail::AttentionScores(q + i0 * l.d, rows, l.d, kt, ld, i1, l.scale, p, ld);
  for (int64_t a = 0; a < rows; ++a) {
    float* row = p + a * ld;
    const int64_t seen = i0 + a + 1;
    const float sum = ExpShiftedFast(row, seen, RowMax(row, seen));
    ScaleRow(row, seen, 1.0f / sum);
    std::fill(row + seen, row + i1, 0.0f);
  }
}

torch::Tensor Forward(const Layout& l, const torch::Tensor& q, const torch::Tensor& k,
                      const torch::Tensor& v) {
  torch::Tensor o = torch::empty_like(q);
  const float *qp = q.data_ptr<float>(), *kp = k.data_ptr<float>(), *vp = v.data_ptr<float>();
  float* op = o.data_ptr<float>();
  ForEachTask(l, [&](int64_t task, Buffers& b) {
    const int64_t j = task / l.kv, g = task % l.kv;
    const int64_t off = l.starts[static_cast<size_t>(j)], n = l.lens[static_cast<size_t>(j)];
    Transpose(kp + (g * l.n + off) * l.d, n, l.d, l.d, b.kt.data());  // (D, n)
    const float* values = vp + (g * l.n + off) * l.d;
    for (int64_t hh = g * l.r; hh < (g + 1) * l.r; ++hh) {
      const float* qh = qp + (hh * l.n + off) * l.d;
      float* oh = op + (hh * l.n + off) * l.d;
      for (int64_t i0 = 0; i0 < n; i0 += kBlock) {
        const int64_t i1 = std::min(n, i0 + kBlock);
        Probabilities(l, qh, i0, i1, b.kt.data(), n, b.p.data());
        detail::AttentionMix(b.p.data(), i1 - i0, n, values, i1, l.d, oh + i0 * l.d, l.d);
      }
    }
  });
  return o;
}

// dq, dk, dv from the forward's inputs, its output o and the output's
// gradient go; the probabilities recomputed block by block as the forward
// computed them.
tensor_list Backward(const Layout& l, const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                     const torch::Tensor& o, const torch::Tensor& go) {
  torch::Tensor dq = torch::empty_like(q), dk = torch::empty_like(k), dv = torch::empty_like(v);
  const float *qp = q.data_ptr<float>(), *kp = k.data_ptr<float>(), *vp = v.data_ptr<float>();
  const float *op = o.data_ptr<float>(), *gp = go.data_ptr<float>();
  float *dqp = dq.data_ptr<float>(), *dkp = dk.data_ptr<float>(), *dvp = dv.data_ptr<float>();
  ForEachTask(l, [&](int64_t task, Buffers& b) {
    const int64_t j = task / l.kv, g = task % l.kv, d = l.d;
    const int64_t off = l.starts[static_cast<size_t>(j)], n = l.lens[static_cast<size_t>(j)];
    const float* keys = kp + (g * l.n + off) * d;
    const float* values = vp + (g * l.n + off) * d;
    Transpose(keys, n, d, d, b.kt.data());  // (D, n)
    Transpose(values, n, d, d, b.vt.data());
    float* dkg = dkp + (g * l.n + off) * d;  // this task's rows of dk and dv
    float* dvg = dvp + (g * l.n + off) * d;
    std::fill(dkg, dkg + n * d, 0.0f);
    std::fill(dvg, dvg + n * d, 0.0f);
    float *p = b.p.data(), *dp = b.dp.data(), *t = b.t.data(), *tmp = b.tmp.data();
    for (int64_t hh = g * l.r; hh < (g + 1) * l.r; ++hh) {
      const int64_t at = (hh * l.n + off) * d;
      const float *qh = qp + at, *oh = op + at, *gh = gp + at;
      for (int64_t i0 = 0; i0 < n; i0 += kBlock) {
        const int64_t i1 = std::min(n, i0 + kBlock), rows = i1 - i0;
        Probabilities(l, qh, i0, i1, b.kt.data(), n, p);
        // dV[0, i1) += P^T dO
        Transpose(p, rows, i1, n, t);
        detail::AttentionMix(t, i1, rows, gh + i0 * d, rows, d, tmp, d);
        AddTo(dvg, tmp, i1 * d);
        // dP = dO V^T, then dS = P (dP - dO . O) scale
        detail::AttentionScores(gh + i0 * d, rows, d, b.vt.data(), n, i1, 1.0f, dp, n);
        for (int64_t a = 0; a < rows; ++a) {
          const int64_t row = i0 + a;
          const float delta = Dot(gh + row * d, oh + row * d, d);
          ScoreGrad(p + a * n, dp + a * n, i1, delta, l.scale);
        }
        // dQ = dS K;  dK[0, i1) += dS^T Q
        detail::AttentionMix(dp, rows, n, keys, i1, d, dqp + at + i0 * d, d);
        Transpose(dp, rows, i1, n, t);
        detail::AttentionMix(t, i1, rows, qh + i0 * d, rows, d, tmp, d);
        AddTo(dkg, tmp, i1 * d);
      }
    }
  });
  return {dq, dk, dv};
}

class VarlenAttentionFn : public torch::autograd::Function<VarlenAttentionFn> {
 public:
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& q, const torch::Tensor& k,
                               const torch::Tensor& v, const std::vector<int64_t>& seq_lens, double scale) {
    torch::Tensor qc = q.contiguous(), kc = k.contiguous(), vc = v.contiguous();
    torch::Tensor o = Forward(MakeLayout(qc, kc, vc, seq_lens, scale), qc, kc, vc);
    ctx->save_for_backward({qc, kc, vc, o});
    ctx->saved_data["seq_lens"] = seq_lens;
    ctx->saved_data["scale"] = scale;
    return o;
  }

  static tensor_list backward(AutogradContext* ctx, tensor_list grads) {
    auto saved = ctx->get_saved_variables();
    const std::vector<int64_t> seq_lens = ctx->saved_data["seq_lens"].toIntVector();
    const double scale = ctx->saved_data["scale"].toDouble();
    const Layout l = MakeLayout(saved[0], saved[1], saved[2], seq_lens, scale);
    tensor_list g = Backward(l, saved[0], saved[1], saved[2], saved[3], grads[0].contiguous());
    return {g[0], g[1], g[2], torch::Tensor(), torch::Tensor()};
  }
};

}  // namespace

bool VarlenAttentionApplies(const torch::Tensor& q) {
  return q.device().is_cpu() && q.scalar_type() == torch::kFloat32;
}

torch::Tensor VarlenCausalAttention(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                                    const std::vector<int64_t>& seq_lens, double scale) {
  if (torch::GradMode::is_enabled() && (q.requires_grad() || k.requires_grad() || v.requires_grad())) {
    return VarlenAttentionFn::apply(q, k, v, seq_lens, scale);
  }
  torch::Tensor qc = q.contiguous(), kc = k.contiguous(), vc = v.contiguous();
  return Forward(MakeLayout(qc, kc, vc, seq_lens, scale), qc, kc, vc);
}

}  // namespace burst
