// What sets the families apart (Qwen 2's q/k/v biases, Qwen 3's q/k norms,
// a mixture of experts, Mistral's attention window) through every path of
// the forward: the
// per-row KV cache and its fused decoding step, sequences packed end to
// end, and the refusal of a forward longer than a sliding window. Their
// parity with transformers is parity_test's.
#include <gtest/gtest.h>

#include <functional>
#include <map>
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
  LlamaConfig c = test_util::FamilyConfig(type);
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
  for (const char* type : {"qwen2", "qwen3", "qwen3_moe", "gemma3_text"}) {
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
  for (const char* type : {"qwen2", "qwen3", "qwen3_moe", "gemma3_text"}) {
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

// The MoE with a LoRA of rank 2 (alpha 4) on every projection, its A and
// B all random (*spec gets the spec).
LlamaModel MoeWithLora(LoraSpec* spec) {
  LlamaModel m = FamilyModel("qwen3_moe");
  spec->rank = 2;
  spec->alpha = 4;
  m.AddLora(*spec, 1);
  torch::NoGradGuard no_grad;
  auto gen = at::make_generator<at::CPUGeneratorImpl>(7);
  for (auto& [n, slot] : m.LoraWeightSlots()) slot->normal_(0.0, 0.1, gen);
  return m;
}

// One token without autograd (decoding one sequence) takes a path of its
// own; it gives the grouped path's bits, with and without the experts' LoRA.
TEST(Families, OneTokenDecodedGivesTheGroupedPathsBits) {
  LoraSpec spec;
  const LlamaModel m = MoeWithLora(&spec);
  const LlamaLayer& l = m.layers[0];
  for (int seed = 0; seed < 4; ++seed) {
    const torch::Tensor x = torch::randn({1, 1, 64}, at::make_generator<at::CPUGeneratorImpl>(20 + seed));
    for (double scale : {0.0, spec.scale()}) {
      const torch::Tensor grouped = SparseMoe(x, l, 2, true, nullptr, scale).detach();  // autograd on
      torch::NoGradGuard no_grad;
      EXPECT_TRUE(torch::equal(SparseMoe(x, l, 2, true, nullptr, scale), grouped)) << seed << " " << scale;
    }
  }
}

// LoRA on the experts as PEFT lays it out (gate and up fused at twice the
// rank, down at the rank; expert e's A rows and B columns), against the
// definition: each expert's weights plus scale * B_e A_e; merged, the same.
TEST(Families, ExpertLoraIsEachExpertsWeightPlusItsLowRankDelta) {
  LoraSpec spec;
  LlamaModel m = MoeWithLora(&spec);
  std::map<std::string, std::vector<int64_t>> shapes;
  for (const auto& [n, t] : m.LoraWeights()) shapes[n] = t.sizes().vec();
  const std::string experts = "base_model.model.model.layers.0.mlp.experts.";
  EXPECT_EQ(shapes[experts + "base_layer.lora_A.weight"], (std::vector<int64_t>{4 * 4, 64}))
      << "gate_up: 2r a expert";
  EXPECT_EQ(shapes[experts + "base_layer.lora_B.weight"], (std::vector<int64_t>{2 * 24, 4 * 4}));
  EXPECT_EQ(shapes[experts + "lora_A.weight"], (std::vector<int64_t>{4 * 2, 24})) << "down: r a expert";
  EXPECT_EQ(shapes[experts + "lora_B.weight"], (std::vector<int64_t>{64, 4 * 2}));
  EXPECT_FALSE(shapes.count("base_model.model.model.layers.1.mlp.gate_proj.lora_A.weight"))
      << "a mixture of experts' dense layers keep their MLP, as PEFT converts the targets";
  EXPECT_TRUE(shapes.count("base_model.model.model.layers.1.self_attn.q_proj.lora_A.weight"));
  torch::NoGradGuard no_grad;
  LlamaLayer& l = m.layers[0];
  const torch::Tensor x = torch::randn({2, 5, 64}, at::make_generator<at::CPUGeneratorImpl>(8));
  const torch::Tensor got = SparseMoe(x, l, 2, true, nullptr, spec.scale());
  // The definition: every expert's weights with its delta added, no LoRA.
  LlamaLayer plain = l;
  const LoraPair &gu = l.expert_lora.at("gate_up"), &dn = l.expert_lora.at("down");
  for (int64_t e = 0; e < 4; ++e) {
    const auto i = static_cast<size_t>(e);
    const torch::Tensor d_gu = gu.b.view({48, 4, 4}).select(2, e).matmul(gu.a.narrow(0, 4 * e, 4)) * 2.0;
    const torch::Tensor d_dn = dn.b.view({64, 2, 4}).select(2, e).matmul(dn.a.narrow(0, 2 * e, 2)) * 2.0;
    plain.expert_gate[i] = l.expert_gate[i] + d_gu.narrow(0, 0, 24);
    plain.expert_up[i] = l.expert_up[i] + d_gu.narrow(0, 24, 24);
    plain.expert_down[i] = l.expert_down[i] + d_dn;
  }
  plain.expert_lora.clear();
  EXPECT_LE(RelErr(got, SparseMoe(x, plain, 2, true)), 1e-5);
  EXPECT_GT(RelErr(got, SparseMoe(x, l, 2, true)), 1e-3) << "the adapter changes the experts";

  const torch::Tensor ids = RandomIds(2, 9, 279, 3);
  const torch::Tensor adapted = m.Forward(ids);
  m.MergeLora();
  EXPECT_LE(RelErr(m.Forward(ids), adapted), 1e-5) << "merged into the experts' weights";
}

TEST(Families, ExpertLoraRefusesWhatPeftCannotDoByName) {
  LlamaModel m = FamilyModel("qwen3_moe");
  LoraSpec spec;
  spec.targets = {"q_proj", "gate_proj"};
  const Status split = ExpectBurstError([&] { m.AddLora(spec, 1); }, Code::kInvalidArgument,
                                        {"gate_proj and up_proj are one fused weight", "both or neither"});
  EXPECT_EQ(split.param(), "lora.targets");
  spec.targets = {"down_proj"};
  spec.dropout = 0.1;
  const Status dropout = ExpectBurstError([&] { m.AddLora(spec, 1); }, Code::kUnimplemented, {"dropout"});
  EXPECT_EQ(dropout.param(), "lora.dropout");
  EXPECT_FALSE(m.lora) << "nothing added";
  spec.targets = {"q_proj", "k_proj", "v_proj", "o_proj"};
  m.AddLora(spec, 1);  // dropout on the attention alone is fine
  EXPECT_TRUE(m.layers[0].expert_lora.empty());
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
