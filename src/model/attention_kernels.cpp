#include "model/attention_kernels.h"

#include <immintrin.h>

#include <algorithm>

#include "core/blas_core.h"
#include "model/simd_clones.h"

namespace burst::detail {
namespace {

BURST_SIMD_CLONES void ScoresLoop(const float* q, int64_t r, int64_t d, const float* keys_t, int64_t ld,
                                  int64_t n, float scale, float* scores, int64_t scores_ld) {
  for (int64_t j = 0; j < r; ++j) {
    float* out = scores + j * scores_ld;
    const float* qj = q + j * d;
    std::fill(out, out + n, 0.0f);
    for (int64_t i = 0; i < d; ++i) {
      const float w = qj[i] * scale;
      const float* row = keys_t + i * ld;
      for (int64_t s = 0; s < n; ++s) out[s] += w * row[s];
    }
  }
}

BURST_SIMD_CLONES void MixLoop(const float* p, int64_t r, int64_t p_ld, const float* values, int64_t n,
                               int64_t d, float* out, int64_t out_ld) {
  for (int64_t j = 0; j < r; ++j) {
    float* o = out + j * out_ld;
    std::fill(o, o + d, 0.0f);
    const float* pj = p + j * p_ld;
    for (int64_t s = 0; s < n; ++s) {
      const float w = pj[s];
      const float* v = values + s * d;
      for (int64_t i = 0; i < d; ++i) o[i] += w * v[i];
    }
  }
}

#if defined(__x86_64__) && defined(__GNUC__)
#define BURST_HAVE_BLOCKED 1

// The lanes of the 16 from `from` that lie before `end`.
inline __mmask16 Lanes(int64_t from, int64_t end) {
  const int64_t left = end - from;
  if (left >= 16) return static_cast<__mmask16>(0xFFFF);
  if (left <= 0) return 0;
  return static_cast<__mmask16>((1u << left) - 1u);
}

// NJ query heads' scores over 64 keys at a time: 4 x NJ sums in registers,
// feature i in order, each key vector loaded once for the NJ heads.
template <int NJ>
__attribute__((target("avx512f"))) void Scores512(const float* q, int64_t d, const float* keys_t, int64_t ld,
                                                  int64_t n, float scale, float* scores, int64_t scores_ld) {
  for (int64_t s0 = 0; s0 < n; s0 += 64) {
    __mmask16 m[4];
    for (int v = 0; v < 4; ++v) m[v] = Lanes(s0 + 16 * v, n);
    __m512 acc[NJ][4];
    for (int j = 0; j < NJ; ++j) {
      for (int v = 0; v < 4; ++v) acc[j][v] = _mm512_setzero_ps();
    }
    for (int64_t i = 0; i < d; ++i) {
      const float* row = keys_t + i * ld + s0;
      __m512 w[NJ];
      for (int j = 0; j < NJ; ++j) w[j] = _mm512_set1_ps(q[j * d + i] * scale);
      for (int v = 0; v < 4; ++v) {
        const __m512 k = _mm512_maskz_loadu_ps(m[v], row + 16 * v);
        for (int j = 0; j < NJ; ++j) acc[j][v] = _mm512_fmadd_ps(w[j], k, acc[j][v]);
      }
    }
    for (int j = 0; j < NJ; ++j) {
      for (int v = 0; v < 4; ++v)
        _mm512_mask_storeu_ps(scores + j * scores_ld + s0 + 16 * v, m[v], acc[j][v]);
    }
  }
}

// NJ heads' weighted sums, 32 features at a time: 2 x NJ sums in registers,
// key s in order, each value vector loaded once for the NJ heads.
template <int NJ>
__attribute__((target("avx512f"))) void Mix512(const float* p, int64_t p_ld, const float* values, int64_t n,
                                               int64_t d, float* out, int64_t out_ld) {
  for (int64_t i0 = 0; i0 < d; i0 += 32) {
    const __mmask16 m0 = Lanes(i0, d), m1 = Lanes(i0 + 16, d);
    __m512 acc[NJ][2];
    for (int j = 0; j < NJ; ++j) acc[j][0] = acc[j][1] = _mm512_setzero_ps();
    for (int64_t s = 0; s < n; ++s) {
      const float* v = values + s * d + i0;
      const __m512 v0 = _mm512_maskz_loadu_ps(m0, v), v1 = _mm512_maskz_loadu_ps(m1, v + 16);
      for (int j = 0; j < NJ; ++j) {
        const __m512 w = _mm512_set1_ps(p[j * p_ld + s]);
        acc[j][0] = _mm512_fmadd_ps(w, v0, acc[j][0]);
        acc[j][1] = _mm512_fmadd_ps(w, v1, acc[j][1]);
      }
    }
    for (int j = 0; j < NJ; ++j) {
      _mm512_mask_storeu_ps(out + j * out_ld + i0, m0, acc[j][0]);
      _mm512_mask_storeu_ps(out + j * out_ld + i0 + 16, m1, acc[j][1]);
    }
  }
}

// The lanes of the 8 from `from` that lie before `end`, as maskload wants
// them (the sign bit of each 32-bit lane).
__attribute__((target("avx2"))) inline __m256i Lanes8(int64_t from, int64_t end) {
  const int64_t left = std::clamp<int64_t>(end - from, 0, 8);
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(left)),
                            _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

// Scores512 on AVX2 + FMA: NJ heads' scores over 32 keys at a time.
template <int NJ>
__attribute__((target("avx2,fma"))) void Scores256(const float* q, int64_t d, const float* keys_t, int64_t ld,
                                                   int64_t n, float scale, float* scores, int64_t scores_ld) {
  for (int64_t s0 = 0; s0 < n; s0 += 32) {
    __m256i m[4];
    for (int v = 0; v < 4; ++v) m[v] = Lanes8(s0 + 8 * v, n);
    __m256 acc[NJ][4];
    for (int j = 0; j < NJ; ++j) {
      for (int v = 0; v < 4; ++v) acc[j][v] = _mm256_setzero_ps();
    }
    for (int64_t i = 0; i < d; ++i) {
      const float* row = keys_t + i * ld + s0;
      __m256 w[NJ];
      for (int j = 0; j < NJ; ++j) w[j] = _mm256_set1_ps(q[j * d + i] * scale);
      for (int v = 0; v < 4; ++v) {
        const __m256 k = _mm256_maskload_ps(row + 8 * v, m[v]);
        for (int j = 0; j < NJ; ++j) acc[j][v] = _mm256_fmadd_ps(w[j], k, acc[j][v]);
      }
    }
    for (int j = 0; j < NJ; ++j) {
      for (int v = 0; v < 4; ++v) _mm256_maskstore_ps(scores + j * scores_ld + s0 + 8 * v, m[v], acc[j][v]);
    }
  }
}

// Mix512 on AVX2 + FMA: NJ heads' weighted sums, 16 features at a time.
template <int NJ>
__attribute__((target("avx2,fma"))) void Mix256(const float* p, int64_t p_ld, const float* values, int64_t n,
                                                int64_t d, float* out, int64_t out_ld) {
  for (int64_t i0 = 0; i0 < d; i0 += 16) {
    const __m256i m0 = Lanes8(i0, d), m1 = Lanes8(i0 + 8, d);
    __m256 acc[NJ][2];
    for (int j = 0; j < NJ; ++j) acc[j][0] = acc[j][1] = _mm256_setzero_ps();
    for (int64_t s = 0; s < n; ++s) {
      const float* v = values + s * d + i0;
      const __m256 v0 = _mm256_maskload_ps(v, m0), v1 = _mm256_maskload_ps(v + 8, m1);
      for (int j = 0; j < NJ; ++j) {
        const __m256 w = _mm256_set1_ps(p[j * p_ld + s]);
        acc[j][0] = _mm256_fmadd_ps(w, v0, acc[j][0]);
        acc[j][1] = _mm256_fmadd_ps(w, v1, acc[j][1]);
      }
    }
    for (int j = 0; j < NJ; ++j) {
      _mm256_maskstore_ps(out + j * out_ld + i0, m0, acc[j][0]);
      _mm256_maskstore_ps(out + j * out_ld + i0 + 8, m1, acc[j][1]);
    }
  }
}
#endif

enum class Kernels { kPlain, kAvx2, kAvx512 };

Kernels Pick() {
#ifdef BURST_HAVE_BLOCKED
  const CpuVectorUnits units = HostVectorUnits();
  if (units.avx512) return Kernels::kAvx512;
  if (units.avx2_fma) return Kernels::kAvx2;
#endif
  return Kernels::kPlain;
}

Kernels Picked() {
  static const Kernels k = Pick();
  return k;
}

}  // namespace

bool AttentionKernelsBlocked() { return Picked() != Kernels::kPlain; }

void AttentionScoresPlain(const float* q, int64_t r, int64_t d, const float* keys_t, int64_t ld, int64_t n,
                          float scale, float* scores, int64_t scores_ld) {
  ScoresLoop(q, r, d, keys_t, ld, n, scale, scores, scores_ld);
}

void AttentionMixPlain(const float* p, int64_t r, int64_t p_ld, const float* values, int64_t n, int64_t d,
                       float* out, int64_t out_ld) {
  MixLoop(p, r, p_ld, values, n, d, out, out_ld);
}

void AttentionScores(const float* q, int64_t r, int64_t d, const float* keys_t, int64_t ld, int64_t n,
                     float scale, float* scores, int64_t scores_ld) {
#ifdef BURST_HAVE_BLOCKED
  if (Picked() == Kernels::kAvx512) {
    int64_t j = 0;
    for (; j + 2 <= r; j += 2)
      Scores512<2>(q + j * d, d, keys_t, ld, n, scale, scores + j * scores_ld, scores_ld);
    if (j < r) Scores512<1>(q + j * d, d, keys_t, ld, n, scale, scores + j * scores_ld, scores_ld);
    return;
  }
  if (Picked() == Kernels::kAvx2) {
    int64_t j = 0;
    for (; j + 2 <= r; j += 2)
      Scores256<2>(q + j * d, d, keys_t, ld, n, scale, scores + j * scores_ld, scores_ld);
    if (j < r) Scores256<1>(q + j * d, d, keys_t, ld, n, scale, scores + j * scores_ld, scores_ld);
    return;
  }
#endif
  ScoresLoop(q, r, d, keys_t, ld, n, scale, scores, scores_ld);
}

void AttentionMix(const float* p, int64_t r, int64_t p_ld, const float* values, int64_t n, int64_t d,
                  float* out, int64_t out_ld) {
#ifdef BURST_HAVE_BLOCKED
  if (Picked() == Kernels::kAvx512) {
    int64_t j = 0;
    for (; j + 4 <= r; j += 4) Mix512<4>(p + j * p_ld, p_ld, values, n, d, out + j * out_ld, out_ld);
    const int64_t left = r - j;
    if (left == 3) Mix512<3>(p + j * p_ld, p_ld, values, n, d, out + j * out_ld, out_ld);
    if (left == 2) Mix512<2>(p + j * p_ld, p_ld, values, n, d, out + j * out_ld, out_ld);
    if (left == 1) Mix512<1>(p + j * p_ld, p_ld, values, n, d, out + j * out_ld, out_ld);
    return;
  }
  if (Picked() == Kernels::kAvx2) {
    int64_t j = 0;
    for (; j + 4 <= r; j += 4) Mix256<4>(p + j * p_ld, p_ld, values, n, d, out + j * out_ld, out_ld);
    const int64_t left = r - j;
    if (left == 3) Mix256<3>(p + j * p_ld, p_ld, values, n, d, out + j * out_ld, out_ld);
    if (left == 2) Mix256<2>(p + j * p_ld, p_ld, values, n, d, out + j * out_ld, out_ld);
    if (left == 1) Mix256<1>(p + j * p_ld, p_ld, values, n, d, out + j * out_ld, out_ld);
    return;
  }
#endif
  MixLoop(p, r, p_ld, values, n, d, out, out_ld);
}

}  // namespace burst::detail
