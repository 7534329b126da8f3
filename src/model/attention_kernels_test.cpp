// Tests of the decoding step's attention loops (attention_kernels.h): both
// variants (on a CPU without AVX-512 or AVX2 + FMA, the plain loops twice)
// equal a float64 reference, and neither writes past its n keys or d
// features. (Not bit for
// bit each other: GCC's vectorised epilogue of the plain loops multiplies
// and adds apart where the main loop fuses them.)
#include "model/attention_kernels.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

namespace burst::detail {
namespace {

std::vector<float> Random(size_t n, uint32_t seed) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = dist(gen);
  return v;
}

constexpr float kUnwritten = 12345.0f;

// Heads per key head from 1 to 8 (whole and partial groups of the blocked
// loops: 2 for scores, 4 for sums), head sizes across whole and partial
// vectors, key counts across whole and partial blocks of 64 (AVX-512) and
// 32 (AVX2).
const int64_t kHeads[] = {1, 2, 3, 4, 5, 8};
const int64_t kDims[] = {8, 32, 40, 64};
const int64_t kKeys[] = {1, 15, 16, 17, 63, 64, 65, 200};

TEST(AttentionKernels, ScoresEqualTheReference) {
  for (int64_t r : kHeads) {
    for (int64_t d : kDims) {
      for (int64_t n : kKeys) {
        const int64_t ld = n + 7, sld = n + 3;  // padded strides: nothing past n is read or written
        const std::vector<float> q = Random(static_cast<size_t>(r * d), 1);
        const std::vector<float> keys = Random(static_cast<size_t>(d * ld), 2);
        const float scale = 1.0f / std::sqrt(static_cast<float>(d));
        std::vector<float> a(static_cast<size_t>(r * sld), kUnwritten), b = a;
        AttentionScores(q.data(), r, d, keys.data(), ld, n, scale, a.data(), sld);
        AttentionScoresPlain(q.data(), r, d, keys.data(), ld, n, scale, b.data(), sld);
        SCOPED_TRACE("r=" + std::to_string(r) + " d=" + std::to_string(d) + " n=" + std::to_string(n));
        for (int64_t j = 0; j < r * 2; ++j) {  // rows of a, then of b
          for (int64_t s = 0; s < sld; ++s) {
            const float got = (j < r ? a : b)[static_cast<size_t>(j % r * sld + s)];
            if (s >= n) {
              ASSERT_EQ(got, kUnwritten) << "wrote past key " << n;
              continue;
            }
            double want = 0;
            for (int64_t i = 0; i < d; ++i) {
              const float w = q[static_cast<size_t>(j % r * d + i)] * scale;
              want += static_cast<double>(w) * keys[static_cast<size_t>(i * ld + s)];
            }
            ASSERT_NEAR(got, want, 1e-5 * (1 + std::abs(want)));
          }
        }
      }
    }
  }
}

TEST(AttentionKernels, SumsEqualTheReference) {
  for (int64_t r : kHeads) {
    for (int64_t d : kDims) {
      for (int64_t n : kKeys) {
        const int64_t pld = n + 5, old = d + 3;
        std::vector<float> p = Random(static_cast<size_t>(r * pld), 3);
        for (float& x : p) x = std::abs(x) / static_cast<float>(n);
        const std::vector<float> values = Random(static_cast<size_t>(n * d), 4);
        std::vector<float> a(static_cast<size_t>(r * old), kUnwritten), b = a;
        AttentionMix(p.data(), r, pld, values.data(), n, d, a.data(), old);
        AttentionMixPlain(p.data(), r, pld, values.data(), n, d, b.data(), old);
        SCOPED_TRACE("r=" + std::to_string(r) + " d=" + std::to_string(d) + " n=" + std::to_string(n));
        for (int64_t j = 0; j < r * 2; ++j) {  // rows of a, then of b
          for (int64_t i = 0; i < old; ++i) {
            const float got = (j < r ? a : b)[static_cast<size_t>(j % r * old + i)];
            if (i >= d) {
              ASSERT_EQ(got, kUnwritten) << "wrote past feature " << d;
              continue;
            }
            double want = 0;
            for (int64_t s = 0; s < n; ++s) {
              const float w = p[static_cast<size_t>(j % r * pld + s)];
              want += static_cast<double>(w) * values[static_cast<size_t>(s * d + i)];
            }
            ASSERT_NEAR(got, want, 1e-5 * (1 + std::abs(want)));
          }
        }
      }
    }
  }
}

}  // namespace
}  // namespace burst::detail
