// Tests of the packed causal attention (varlen_attention.h): its output and
// its gradients in q, k and v equal attention computed sequence by sequence
// with libtorch's own ops and autograd (grouped-query heads, sequences of
// one token, across block boundaries, a head size the vector loops do not
// divide), it gives the same bits at 1 and 2 threads, and it refuses what it
// cannot run.
#include "model/varlen_attention.h"

#include <gtest/gtest.h>

#include <cmath>

#include "core/status.h"

namespace burst {
namespace {

// Causal attention of each sequence alone, with libtorch's ops: (H, N, D).
torch::Tensor Reference(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                        const std::vector<int64_t>& lens, double scale) {
  const int64_t r = q.size(0) / k.size(0);
  std::vector<torch::Tensor> outs;
  int64_t at = 0;
  for (int64_t n : lens) {
    torch::Tensor qs = q.narrow(1, at, n);                          // (H, n, D)
    torch::Tensor ks = k.narrow(1, at, n).repeat_interleave(r, 0);  // (H, n, D)
    torch::Tensor vs = v.narrow(1, at, n).repeat_interleave(r, 0);
    torch::Tensor att = torch::matmul(qs, ks.transpose(1, 2)) * scale;  // (H, n, n)
    torch::Tensor mask = torch::ones({n, n}, torch::kBool).triu(1);
    att = att.masked_fill(mask, -std::numeric_limits<float>::infinity());
    outs.push_back(torch::matmul(torch::softmax(att, -1), vs));  // (H, n, D)
    at += n;
  }
  return torch::cat(outs, 1);
}

// Relative to b's largest magnitude, or absolute below 1 (a sequence of one
// token has dq and dk exactly 0 in the reference: the softmax of one score).
double RelDiff(const torch::Tensor& a, const torch::Tensor& b) {
  return (a - b).abs().max().item<double>() / std::max(1.0, b.abs().max().item<double>());
}

struct Case {
  int64_t h, kv, d;
  std::vector<int64_t> lens;
};

void ExpectMatchesReference(const Case& c) {
  torch::manual_seed(7);
  int64_t n = 0;
  for (int64_t len : c.lens) n += len;
  const double scale = 1.0 / std::sqrt(static_cast<double>(c.d));
  torch::Tensor q = (torch::randn({c.h, n, c.d}) * 2).requires_grad_();
  torch::Tensor k = (torch::randn({c.kv, n, c.d}) * 2).requires_grad_();
  torch::Tensor v = torch::randn({c.kv, n, c.d}).requires_grad_();
  torch::Tensor go = torch::randn({c.h, n, c.d});

  torch::Tensor o = VarlenCausalAttention(q, k, v, c.lens, scale);
  o.backward(go);
  torch::Tensor dq = q.grad().clone(), dk = k.grad().clone(), dv = v.grad().clone();
  q.mutable_grad() = torch::Tensor();
  k.mutable_grad() = torch::Tensor();
  v.mutable_grad() = torch::Tensor();
  torch::Tensor ref = Reference(q, k, v, c.lens, scale);
  ref.backward(go);

  EXPECT_LT(RelDiff(o, ref), 1e-5);
  EXPECT_LT(RelDiff(dq, q.grad()), 1e-5);
  EXPECT_LT(RelDiff(dk, k.grad()), 1e-5);
  EXPECT_LT(RelDiff(dv, v.grad()), 1e-5);
  // Without autograd: the same forward.
  torch::NoGradGuard no_grad;
  EXPECT_TRUE(torch::equal(VarlenCausalAttention(q, k, v, c.lens, scale), o));
}

TEST(VarlenAttention, EqualsAttentionSequenceBySequence) {
  ExpectMatchesReference({4, 2, 32, {5, 1, 70, 33, 2}});  // grouped heads, blocks of 32 crossed
  ExpectMatchesReference({3, 3, 24, {1, 40, 17}});        // a head size of 24
  ExpectMatchesReference({6, 2, 40, {100}});              // one long sequence, 3 heads a key head
  ExpectMatchesReference({2, 1, 64, {1, 1, 1}});          // every sequence one token
}

TEST(VarlenAttention, SameBitsAtAnyThreadCount) {
  torch::manual_seed(3);
  const std::vector<int64_t> lens = {90, 3, 41, 64, 7, 120};
  int64_t n = 0;
  for (int64_t len : lens) n += len;
  torch::Tensor q = torch::randn({8, n, 32}).requires_grad_();
  torch::Tensor k = torch::randn({4, n, 32}).requires_grad_();
  torch::Tensor v = torch::randn({4, n, 32}).requires_grad_();
  torch::Tensor go = torch::randn({8, n, 32});
  const int before = at::get_num_threads();
  std::vector<std::vector<torch::Tensor>> runs;
  for (int threads : {1, 2}) {
    at::set_num_threads(threads);
    q.mutable_grad() = k.mutable_grad() = v.mutable_grad() = torch::Tensor();
    torch::Tensor o = VarlenCausalAttention(q, k, v, lens, 0.2);
    o.backward(go);
    runs.push_back({o.detach(), q.grad(), k.grad(), v.grad()});
  }
  at::set_num_threads(before);
  for (size_t i = 0; i < runs[0].size(); ++i) EXPECT_TRUE(torch::equal(runs[0][i], runs[1][i])) << i;
}

TEST(VarlenAttention, RefusesWhatItCannotRun) {
  torch::Tensor q = torch::randn({4, 10, 8}), k = torch::randn({2, 10, 8});
  EXPECT_TRUE(VarlenAttentionApplies(q));
  EXPECT_FALSE(VarlenAttentionApplies(q.to(torch::kFloat64)));
  EXPECT_THROW(VarlenCausalAttention(q, k, k, {4, 5}, 1.0), Error);   // lengths sum to 9, not 10
  EXPECT_THROW(VarlenCausalAttention(q, k, k, {10, 0}, 1.0), Error);  // an empty sequence
  EXPECT_THROW(VarlenCausalAttention(q, torch::randn({3, 10, 8}), torch::randn({3, 10, 8}), {10}, 1.0),
               Error);  // 4 heads over 3 key heads
  EXPECT_THROW(VarlenCausalAttention(q.to(torch::kFloat64), k, k, {10}, 1.0), Error);
}

}  // namespace
}  // namespace burst
