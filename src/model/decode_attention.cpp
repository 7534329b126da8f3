#include "model/decode_attention.h"

#include <ATen/Parallel.h>

#include <algorithm>
#include <limits>
#include <string>

#include "core/status.h"
#include "model/attention_kernels.h"
#include "model/simd_clones.h"

namespace burst {
namespace {

// Rotary as Hugging Face's rotate_half: the first half x1 cos - x2 sin, the
// second x2 cos + x1 sin.
BURST_SIMD_CLONES void Rotate(const float* x, const float* cos, const float* sin, int64_t d, float* out) {
  const int64_t half = d / 2;
  for (int64_t i = 0; i < half; ++i) out[i] = x[i] * cos[i] - x[i + half] * sin[i];
  for (int64_t i = half; i < d; ++i) out[i] = x[i] * cos[i] + x[i - half] * sin[i];
}

void Check(bool ok, const std::string& what) {
  if (!ok) throw Error(Code::kInternal, "decode attention: " + what);
}

}  // namespace

bool DecodeAttentionApplies(const torch::Tensor& cache_k, int64_t t) {
  return t == 1 && cache_k.device().is_cpu() && cache_k.scalar_type() == torch::kFloat32 &&
         !torch::GradMode::is_enabled();
}

torch::Tensor DecodeAttention(const DecodeAttentionInput& in) {
  const int64_t b = in.q.size(0), h = in.heads, kv = in.kv_heads, d = in.head_dim;
  Check(kv > 0 && h % kv == 0 && d % 2 == 0, "heads do not group");
  const int64_t r = h / kv;
  torch::Tensor& ck = *in.cache_k;
  torch::Tensor& cv = *in.cache_v;
  const std::vector<int64_t>& rows = *in.rows;
  const std::vector<int64_t>& starts = *in.starts;
  Check(in.q.dim() == 2 && in.q.size(1) == h * d && in.q.stride(1) == 1, "q is not (B, H*D)");
  for (const torch::Tensor* t : {&in.k, &in.v}) {
    Check(t->dim() == 2 && t->size(0) == b && t->size(1) == kv * d && t->stride(1) == 1,
          "k or v is not (B, KV*D)");
  }
  Check(
      in.cos.is_contiguous() && in.sin.is_contiguous() && in.cos.numel() == b * d && in.sin.numel() == b * d,
      "rotary tables are not (B, D)");
  Check(ck.dim() == 4 && ck.size(1) == kv && ck.size(3) == d && ck.sizes() == cv.sizes(),
        "cache shapes differ");
  // Keys stored transposed, (rows, KV, D, capacity) in memory; values as shaped.
  Check(ck.stride(3) == ck.size(2) && ck.stride(2) == 1 && ck.stride(1) == d * ck.size(2),
        "keys not stored transposed");
  Check(cv.is_contiguous(), "values not contiguous");
  Check(static_cast<int64_t>(rows.size()) == b && static_cast<int64_t>(starts.size()) == b, "rows or starts");
  const int64_t cap = ck.size(2), cache_rows = ck.size(0);
  int64_t longest = 0;
  for (int64_t i = 0; i < b; ++i) {
    Check(rows[static_cast<size_t>(i)] >= 0 && rows[static_cast<size_t>(i)] < cache_rows,
          "no such cache row");
    Check(starts[static_cast<size_t>(i)] >= 0 && starts[static_cast<size_t>(i)] < cap, "cache full");
    longest = std::max(longest, starts[static_cast<size_t>(i)] + 1);
  }

  // 1. Rotate q and the new key; write the key and value into the cache.
  torch::Tensor qr = torch::empty({b, h, d});
  float* qr_p = qr.data_ptr<float>();
  float* ck_p = ck.data_ptr<float>();
  float* cv_p = cv.data_ptr<float>();
  const float* cos_p = in.cos.data_ptr<float>();
  const float* sin_p = in.sin.data_ptr<float>();
  std::vector<float> rotated(static_cast<size_t>(d));
  for (int64_t i = 0; i < b; ++i) {
    const float* c = cos_p + i * d;
    const float* s = sin_p + i * d;
    const float* q = in.q.data_ptr<float>() + i * in.q.stride(0);
    for (int64_t hh = 0; hh < h; ++hh) Rotate(q + hh * d, c, s, d, qr_p + (i * h + hh) * d);
    const int64_t row = rows[static_cast<size_t>(i)], pos = starts[static_cast<size_t>(i)];
    const float* k = in.k.data_ptr<float>() + i * in.k.stride(0);
    const float* v = in.v.data_ptr<float>() + i * in.v.stride(0);
    for (int64_t g = 0; g < kv; ++g) {
      Rotate(k + g * d, c, s, d, rotated.data());
      float* kt = ck_p + (row * kv + g) * d * cap;  // (D, capacity)
      for (int64_t f = 0; f < d; ++f) kt[f * cap + pos] = rotated[static_cast<size_t>(f)];
      std::copy(v + g * d, v + (g + 1) * d, cv_p + ((row * kv + g) * cap + pos) * d);
    }
  }

  // 2. Scores over each row's own keys; the rest of the padded row -inf.
  torch::Tensor scores = torch::full({b, h, longest}, -std::numeric_limits<float>::infinity());
  float* sc_p = scores.data_ptr<float>();
  const float scale = static_cast<float>(in.scale);
  at::parallel_for(0, b * kv, 1, [&](int64_t lo, int64_t hi) {
    for (int64_t x = lo; x < hi; ++x) {
      const int64_t i = x / kv, g = x % kv;
      const int64_t row = rows[static_cast<size_t>(i)], n = starts[static_cast<size_t>(i)] + 1;
      detail::AttentionScores(qr_p + (i * h + g * r) * d, r, d, ck_p + (row * kv + g) * d * cap, cap, n,
                              scale, sc_p + (i * h + g * r) * longest, longest);
    }
  });
  torch::Tensor p = torch::softmax(scores, -1);  // (B, H, longest): 0 past each row's keys

  // 3. Each head's weighted sum of its row's values.
  torch::Tensor y = torch::empty({b, h * d});
  float* y_p = y.data_ptr<float>();
  const float* p_p = p.data_ptr<float>();
  at::parallel_for(0, b * kv, 1, [&](int64_t lo, int64_t hi) {
    for (int64_t x = lo; x < hi; ++x) {
      const int64_t i = x / kv, g = x % kv;
      const int64_t row = rows[static_cast<size_t>(i)], n = starts[static_cast<size_t>(i)] + 1;
      detail::AttentionMix(p_p + (i * h + g * r) * longest, r, longest, cv_p + (row * kv + g) * cap * d, n, d,
                           y_p + i * h * d + g * r * d, d);
    }
  });
  return y;
}

}  // namespace burst
