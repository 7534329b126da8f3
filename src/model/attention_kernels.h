// The two loops of a decoding step's attention (decode_attention.h), for
// the query heads that share one key head: their scores over one row's
// keys, and their weighted sums of that row's values.
//
// On a CPU with AVX-512 they run register-blocked (the partial sums of 64
// keys or 32 features of up to four heads stay in registers for the whole
// sum; each key or value is loaded once for all the heads); with AVX2 and
// FMA the same in 256-bit registers (32 keys, 16 features); elsewhere as
// plain loops the compiler vectorises for the CPU (GCC multiversioning).
// Both take, for each output, the same float32 fused multiply-adds in the
// same order (features i = 0, 1, ... for a score; keys s = 0, 1, ... for a
// sum), so a result depends on its own row and head only, never on the
// batch around it.
//
// Thread-safety: stateless; each call writes only its own outputs.
#pragma once

#include <cstdint>

namespace burst::detail {

// scores[j * scores_ld + s] = scale * q[j] . key s, for the r query heads
// q (r, d) of one key head and its n keys, stored transposed (keys_t[i * ld
// + s]: feature i of key s).
void AttentionScores(const float* q, int64_t r, int64_t d, const float* keys_t, int64_t ld, int64_t n,
                     float scale, float* scores, int64_t scores_ld);

// out[j * out_ld + i] = sum over the n keys of p[j * p_ld + s] * values[s * d
// + i], for the r heads.
void AttentionMix(const float* p, int64_t r, int64_t p_ld, const float* values, int64_t n, int64_t d,
                  float* out, int64_t out_ld);

// The plain loops, whatever the CPU (for tests: both must agree).
void AttentionScoresPlain(const float* q, int64_t r, int64_t d, const float* keys_t, int64_t ld, int64_t n,
                          float scale, float* scores, int64_t scores_ld);
void AttentionMixPlain(const float* p, int64_t r, int64_t p_ld, const float* values, int64_t n, int64_t d,
                       float* out, int64_t out_ld);

// Whether AttentionScores and AttentionMix run register-blocked loops here
// (AVX-512, or AVX2 + FMA).
bool AttentionKernelsBlocked();

}  // namespace burst::detail
