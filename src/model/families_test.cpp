// What sets the families apart (Qwen 2's q/k/v biases, Qwen 3's q/k norms,
// Mistral's attention window) through every path of the forward: the
// per-row KV cache and its fused decoding step, sequences packed end to
// end, and the refusal of a forward longer than a sliding window. Their
// parity with transformers is parity_test's.
#include <gtest/gtest.h>

#include <set>

#include "model/llama.h"
#include "model/test_util.h"

namespace burst {
namespace {

using test_util::ExpectBurstError;
using test_util::RandomIds;
using test_util::RelErr;

// The tiny preset (2 layers, 64 wide, GQA 4/2, head_dim 16) as `type`,
// random norms and biases, fused as LoadModel leaves a model.
LlamaModel FamilyModel(const std::string& type, int64_t window = 0) {
  torch::set_num_threads(1);
  LlamaConfig c = test_util::TinyConfig(279);
  c.model_type = type;
  c.qkv_bias = type == "qwen2";
  c.qk_norm = type == "qwen3";
  c.attention_window = window;
  LlamaModel m = LlamaModel::Random(c, 3, /*init_std=*/0.08);
  test_util::RandomizeNorms(m, 103);
  m.FreezeBaseAs(torch::kFloat32);
  return m;
}

TEST(Families, TheirWeightsAreNamedAsTransformersNamesThem) {
  auto names = [](const LlamaModel& m) {
    std::set<std::string> out;
    for (const auto& [n, t] : m.BaseWeights()) out.insert(n);
    return out;
  };
  const std::set<std::string> qwen2 = names(FamilyModel("qwen2")), qwen3 = names(FamilyModel("qwen3"));
  EXPECT_TRUE(qwen2.count("model.layers.1.self_attn.k_proj.bias"));
  EXPECT_FALSE(qwen2.count("model.layers.1.self_attn.o_proj.bias"));
  EXPECT_TRUE(qwen3.count("model.layers.1.self_attn.q_norm.weight"));
  EXPECT_TRUE(qwen3.count("model.layers.1.self_attn.k_norm.weight"));
  EXPECT_FALSE(qwen3.count("model.layers.1.self_attn.q_proj.bias"));
}

TEST(Families, PerRowCacheAndItsDecodingStepMatchTheFullForward) {
  for (const char* type : {"qwen2", "qwen3"}) {
    SCOPED_TRACE(type);
    LlamaModel m = FamilyModel(type);
    torch::NoGradGuard no_grad;
    const torch::Tensor ids = RandomIds(2, 10, 279, 4);
    const torch::Tensor full = m.Forward(ids);
    KVCache cache = m.NewCache(2, 16);
    cache.lengths = {0, 0};
    std::vector<torch::Tensor> parts{m.Forward(ids.narrow(1, 0, 4), &cache)};
    for (int64_t t = 4; t < 10; ++t) parts.push_back(m.Forward(ids.narrow(1, t, 1), &cache));  // fused steps
    EXPECT_LE(RelErr(torch::cat(parts, 1), full), 1e-5);
  }
}

TEST(Families, SequencesPackedEndToEndMatchRowsOfTheirOwn) {
  for (const char* type : {"qwen2", "qwen3"}) {
    SCOPED_TRACE(type);
    LlamaModel m = FamilyModel(type);
    torch::NoGradGuard no_grad;
    const std::vector<int64_t> lens = {5, 3, 2};
    std::vector<torch::Tensor> seqs, want;
    for (size_t i = 0; i < lens.size(); ++i) {
      seqs.push_back(RandomIds(1, lens[i], 279, 30 + i));
      want.push_back(m.Hidden(seqs.back()).squeeze(0));
    }
    ForwardOptions fo;
    fo.seq_lens = lens;
    const torch::Tensor got = m.Hidden(torch::cat(seqs, 1), nullptr, fo).squeeze(0);  // (N, C)
    EXPECT_LE(RelErr(got, torch::cat(want, 0)), 1e-5);
  }
}

TEST(Families, AForwardLongerThanTheSlidingWindowIsRefusedNeverApproximated) {
  LlamaModel m = FamilyModel("mistral", /*window=*/8);
  torch::NoGradGuard no_grad;
  const torch::Tensor ids = RandomIds(1, 12, 279, 5);
  EXPECT_EQ(m.Forward(ids.narrow(1, 0, 8)).size(1), 8) << "within one window attention is full";
  const Status over = ExpectBurstError([&] { m.Forward(ids.narrow(1, 0, 9)); }, Code::kInvalidArgument,
                                       {"9 tokens", "sliding attention window of 8"});
  EXPECT_EQ(over.param(), "sliding_window");

  KVCache cache = m.NewCache(1, 16);
  cache.lengths = {0};
  m.Forward(ids.narrow(1, 0, 8), &cache);
  ExpectBurstError([&] { m.Forward(ids.narrow(1, 8, 1), &cache); }, Code::kInvalidArgument,
                   {"sliding attention window"});

  ForwardOptions fits, longer;
  fits.seq_lens = {8, 4};
  longer.seq_lens = {9, 3};
  EXPECT_EQ(m.Hidden(ids, nullptr, fits).size(1), 12) << "packed: each sequence within the window";
  ExpectBurstError([&] { m.Hidden(ids, nullptr, longer); }, Code::kInvalidArgument, {"9 tokens"});
}

}  // namespace
}  // namespace burst
