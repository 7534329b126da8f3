// Tests of the fused decoding step (decode_attention.h): a step through it
// gives the logits and the cache of the general path (the same forward with
// autograd on, which never takes the fused step), for rows at different
// positions, named out of order, some rows sitting out, with a LoRA on the
// projections; and it refuses what it cannot serve.
#include "model/decode_attention.h"

#include <gtest/gtest.h>

#include "core/status.h"
#include "model/test_util.h"

namespace burst {
namespace {

// A cache of 4 rows, rows 0, 1 and 3 prefilled with prompts of 7, 2 and 5 tokens.
KVCache Prefilled(const LlamaModel& model) {
  torch::NoGradGuard no_grad;
  KVCache cache = model.NewCache(4, 32);
  cache.lengths = {0, 0, 0, 0};
  const std::vector<std::pair<int64_t, std::vector<int64_t>>> prompts = {
      {3, {4, 4, 6, 30, 12}}, {0, {5, 9, 14, 2, 7, 11, 3}}, {1, {8, 1}}};
  for (const auto& [row, ids] : prompts) {
    ForwardOptions fo;
    fo.rows = {row};
    model.Forward(torch::tensor(ids).view({1, -1}), &cache, fo);
  }
  return cache;
}

KVCache Copy(const KVCache& c) {
  KVCache out = c;
  for (auto& t : out.k) t = t.clone();  // keeps the transposed layout
  for (auto& t : out.v) t = t.clone();
  return out;
}

void ExpectSameStep(const LlamaModel& model) {
  KVCache fused = Prefilled(model);
  KVCache general = Copy(fused);
  ASSERT_TRUE(torch::equal(fused.k[0], general.k[0]));
  ASSERT_EQ(fused.k[0].strides(), general.k[0].strides());
  ForwardOptions fo;
  fo.rows = {3, 0, 1};  // row 2 sits out; out of order
  const torch::Tensor ids = torch::tensor({int64_t{17}, int64_t{21}, int64_t{2}}).view({3, 1});
  torch::Tensor a, b;
  {
    torch::NoGradGuard no_grad;
    ASSERT_TRUE(DecodeAttentionApplies(fused.k[0], 1));
    a = model.Forward(ids, &fused, fo);
  }
  ASSERT_FALSE(DecodeAttentionApplies(general.k[0], 1));  // autograd on: the general path
  b = model.Forward(ids, &general, fo).detach();
  EXPECT_TRUE(torch::allclose(a, b, 1e-5, 1e-5)) << (a - b).abs().max().item<float>();
  EXPECT_EQ(fused.lengths, (std::vector<int64_t>{8, 3, 0, 6}));
  EXPECT_EQ(fused.lengths, general.lengths);
  for (size_t li = 0; li < fused.k.size(); ++li) {
    // (The step's projections run through small_linear.h, the general
    // path's through OpenBLAS: float32 sums in another order.)
    EXPECT_TRUE(torch::allclose(fused.k[li], general.k[li].detach(), 1e-5, 1e-5))
        << "layer " << li << ": " << (fused.k[li] - general.k[li].detach()).abs().max().item<float>();
    EXPECT_TRUE(torch::allclose(fused.v[li], general.v[li].detach(), 1e-5, 1e-5))
        << "layer " << li << ": " << (fused.v[li] - general.v[li].detach()).abs().max().item<float>();
  }
  // And a second step on both, from the caches each wrote.
  const torch::Tensor next = torch::tensor({int64_t{9}, int64_t{9}, int64_t{40}}).view({3, 1});
  {
    torch::NoGradGuard no_grad;
    a = model.Forward(next, &fused, fo);
  }
  b = model.Forward(next, &general, fo).detach();
  EXPECT_TRUE(torch::allclose(a, b, 1e-5, 1e-5)) << (a - b).abs().max().item<float>();
}

TEST(DecodeAttention, AStepEqualsTheGeneralPath) {
  torch::set_num_threads(1);
  LlamaModel model = LlamaModel::Random(test_util::TinyConfig(279), 5, /*init_std=*/0.1);
  test_util::RandomizeNorms(model, 6);
  ExpectSameStep(model);
}

TEST(DecodeAttention, AStepWithLoraOnTheProjectionsEqualsTheGeneralPath) {
  torch::set_num_threads(1);
  LlamaModel model = LlamaModel::Random(test_util::TinyConfig(279), 7, /*init_std=*/0.1);
  LoraSpec spec;
  spec.rank = 4;
  spec.alpha = 8;
  spec.targets = {"q_proj", "k_proj", "v_proj", "o_proj"};
  model.AddLora(spec, 8);
  {
    torch::NoGradGuard no_grad;
    for (auto& [name, t] : model.LoraWeightSlots()) t->normal_(0.0, 0.1);
  }
  ExpectSameStep(model);
}

TEST(DecodeAttention, RefusesWhatItCannotServe) {
  LlamaModel model = LlamaModel::Random(test_util::TinyConfig(279), 5);
  KVCache cache = model.NewCache(2, 8);
  torch::NoGradGuard no_grad;
  EXPECT_FALSE(DecodeAttentionApplies(cache.k[0], 2));  // a prefill: the general path
  EXPECT_TRUE(DecodeAttentionApplies(cache.k[0], 1));
  const int64_t h = model.config.num_attention_heads, kv = model.config.num_key_value_heads;
  const int64_t d = model.config.head_dim;
  std::vector<int64_t> rows = {0}, starts = {8};  // the row is full
  DecodeAttentionInput in;
  in.q = torch::zeros({1, h * d});
  in.k = torch::zeros({1, kv * d});
  in.v = torch::zeros({1, kv * d});
  in.cos = torch::ones({1, d});
  in.sin = torch::zeros({1, d});
  in.cache_k = &cache.k[0];
  in.cache_v = &cache.v[0];
  in.rows = &rows;
  in.starts = &starts;
  in.heads = h;
  in.kv_heads = kv;
  in.head_dim = d;
  EXPECT_THROW(DecodeAttention(in), Error);
  starts = {7};
  rows = {2};  // no such row
  EXPECT_THROW(DecodeAttention(in), Error);
  rows = {1};
  EXPECT_NO_THROW(DecodeAttention(in));
  torch::Tensor plain = torch::zeros({2, kv, 8, d});  // keys not stored transposed
  in.cache_k = &plain;
  EXPECT_THROW(DecodeAttention(in), Error);
}

}  // namespace
}  // namespace burst
