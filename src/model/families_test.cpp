// What sets the families apart (Qwen 2's q/k/v biases, Qwen 3's q/k norms,
// a mixture of experts, Mistral's attention window) through every path of
// the forward: the
// per-row KV cache and its fused decoding step, sequences packed end to
// end, and the refusal of a forward longer than a sliding window. Their
// parity with transformers is parity_test's.
#include <gtest/gtest.h>

#include <functional>
#include <set>

#include "model/llama.h"
#include "model/moe.h"
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
  c.qk_norm = type == "qwen3" || type == "qwen3_moe";
  if (type == "qwen3_moe") {  // layer 0 sparse (4 experts, 2 a token), layer 1 dense
    c.num_experts = 4;
    c.num_experts_per_tok = 2;
    c.moe_intermediate_size = 24;
    c.norm_topk_prob = true;
    c.mlp_only_layers = {1};
  }
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
  for (const char* type : {"qwen2", "qwen3", "qwen3_moe"}) {
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
  for (const char* type : {"qwen2", "qwen3", "qwen3_moe"}) {
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

// The grouped computation (moe.h) against the definition, token by token:
// softmax over the experts, the top 2 renormalised, their SwiGLUs summed by
// weight; forward and the gradients of the router and every expert.
TEST(Families, ExpertsGroupedByExpertEqualTheDefinitionTokenByToken) {
  LlamaModel m = FamilyModel("qwen3_moe");
  m.SetTrainable(/*full=*/true);
  const LlamaLayer& l = m.layers[0];
  const torch::Tensor x = torch::randn({3, 5, 64}, at::make_generator<at::CPUGeneratorImpl>(8));
  const torch::Tensor probe = torch::randn({3, 5, 64}, at::make_generator<at::CPUGeneratorImpl>(9));
  std::vector<torch::Tensor> params{l.router};
  for (size_t e = 0; e < 4; ++e)
    params.insert(params.end(), {l.expert_gate[e], l.expert_up[e], l.expert_down[e]});
  auto grads = [&](const std::function<torch::Tensor()>& f) {
    for (auto& p : params) p.mutable_grad() = torch::Tensor();
    torch::Tensor y = f();
    (y * probe).sum().backward();
    std::vector<torch::Tensor> out{y.detach()};
    for (auto& p : params) out.push_back(p.grad().defined() ? p.grad().clone() : torch::zeros_like(p));
    return out;
  };
  std::vector<torch::Tensor> routes;
  const std::vector<torch::Tensor> got = grads([&] { return SparseMoe(x, l, 2, true, &routes); });
  const std::vector<torch::Tensor> want = grads([&] {
    const torch::Tensor flat = x.reshape({-1, 64});
    std::vector<torch::Tensor> rows;
    for (int64_t n = 0; n < flat.size(0); ++n) {
      const torch::Tensor t = flat[n];
      const torch::Tensor p = torch::softmax(torch::mv(l.router, t), 0);
      auto [w, idx] = p.topk(2);
      w = w / w.sum();
      torch::Tensor y = torch::zeros({64});
      for (int64_t j = 0; j < 2; ++j) {
        const auto e = static_cast<size_t>(idx[j].item<int64_t>());
        const torch::Tensor h = torch::silu(torch::mv(l.expert_gate[e], t)) * torch::mv(l.expert_up[e], t);
        y = y + w[j] * torch::mv(l.expert_down[e], h);
      }
      rows.push_back(y);
    }
    return torch::stack(rows).view({3, 5, 64});
  });
  ASSERT_EQ(routes.size(), 1u);
  EXPECT_EQ(routes[0].sizes(), torch::IntArrayRef({15, 2}));
  EXPECT_GT(std::get<0>(at::_unique(routes[0])).numel(), 2) << "the tokens spread over the experts";
  for (size_t i = 0; i < got.size(); ++i) EXPECT_LE(RelErr(got[i], want[i]), 1e-5) << i;
}

TEST(Families, LoraOnAMixtureOfExpertsAdaptsTheAttentionAndRefusesTheMlpByName) {
  LlamaModel m = FamilyModel("qwen3_moe");
  LoraSpec spec;
  spec.rank = 2;
  const Status mlp = ExpectBurstError([&] { m.AddLora(spec, 1); }, Code::kUnimplemented,
                                      {"gate_proj", "mixture-of-experts", "q_proj"});
  EXPECT_EQ(mlp.param(), "lora.targets");
  EXPECT_FALSE(m.lora) << "nothing added";
  spec.targets = {"q_proj", "k_proj", "v_proj", "o_proj"};
  m.AddLora(spec, 1);
  std::set<std::string> names;
  for (const auto& [n, t] : m.LoraWeights()) names.insert(n);
  EXPECT_TRUE(names.count("base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight"));
  EXPECT_EQ(names.size(), 2u * 4 * 2) << "4 attention targets on both layers";
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
