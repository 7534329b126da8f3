// Activation checkpointing (layer_recompute.h) against the same step
// without it: the same hidden states, the same gradients for every
// trainable tensor and the generator left where the plain step leaves it,
// across LoRA with dropout, sequences packed end to end, the loss
// positions' last layer, a mixture of experts and Gemma's sliding layers.
#include "model/layer_recompute.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <string>
#include <vector>

#include "model/llama.h"
#include "model/test_util.h"

namespace burst {
namespace {

using test_util::RandomIds;

struct Case {
  std::string name, type;
  bool full = false;
  double dropout = 0.0;
  bool packed = false, outputs = false;
};

LlamaModel MakeModel(const Case& k) {
  torch::set_num_threads(1);
  LlamaModel m = LlamaModel::Random(test_util::FamilyConfig(k.type), 3, /*init_std=*/0.08);
  test_util::RandomizeNorms(m, 103);
  m.FreezeBaseAs(torch::kFloat32);
  if (k.full) {
    m.Unfuse();
    m.SetTrainable(/*full=*/true);
  } else {
    LoraSpec spec;
    spec.rank = 4;
    spec.dropout = k.dropout;
    m.AddLora(spec, 7);
    test_util::RandomizeLora(m, 11);
    m.SetTrainable(/*full=*/false);
  }
  return m;
}

struct Step {
  torch::Tensor hidden, rng_after;
  std::vector<torch::Tensor> grads;
};

Step RunStep(LlamaModel& m, const Case& k, bool checkpoint) {
  for (const torch::Tensor& p : m.TrainableParameters()) {
    torch::Tensor q = p;
    q.mutable_grad() = torch::Tensor();
  }
  torch::Generator gen = at::make_generator<at::CPUGeneratorImpl>(5);
  ForwardOptions fo;
  fo.training = true;
  fo.generator = &gen;
  fo.checkpoint_layers = checkpoint;
  torch::Tensor ids = RandomIds(2, 9, 279, 4);
  if (k.packed) {
    ids = ids.view({1, 18});
    fo.seq_lens = {5, 13};
  }
  if (k.outputs) fo.outputs = torch::tensor({1, 4, 8, 17}, torch::kInt64);
  Step s;
  s.hidden = m.Hidden(ids, nullptr, fo);
  const torch::Tensor probe = torch::randn(s.hidden.sizes(), at::make_generator<at::CPUGeneratorImpl>(9));
  (s.hidden * probe).sum().backward();
  s.hidden = s.hidden.detach();
  for (const torch::Tensor& p : m.TrainableParameters())
    s.grads.push_back(p.grad().defined() ? p.grad().clone() : torch::zeros_like(p));
  s.rng_after = gen.get_state();
  return s;
}

TEST(LayerRecompute, GivesTheGradientsOfTheStepWithoutIt) {
  const std::vector<Case> cases = {
      {"llama_lora_dropout_packed_outputs", "llama", false, 0.1, true, true},
      {"llama_full", "llama", true},
      {"qwen3_moe_lora", "qwen3_moe", false, 0.0, true},
      {"qwen3_moe_full", "qwen3_moe", true, 0.0, false, true},
      {"gemma3_lora_dropout", "gemma3_text", false, 0.05},
  };
  for (const Case& k : cases) {
    SCOPED_TRACE(k.name);
    LlamaModel m = MakeModel(k);
    const int64_t before = CheckpointedLayerCount();
    const Step plain = RunStep(m, k, false);
    EXPECT_EQ(CheckpointedLayerCount(), before);
    const Step recomputed = RunStep(m, k, true);
    EXPECT_EQ(CheckpointedLayerCount(), before + static_cast<int64_t>(m.layers.size()));
    EXPECT_TRUE(torch::equal(plain.hidden, recomputed.hidden));
    ASSERT_EQ(plain.grads.size(), recomputed.grads.size());
    ASSERT_FALSE(plain.grads.empty());
    size_t nonzero = 0;
    for (size_t i = 0; i < plain.grads.size(); ++i) {
      nonzero += test_util::MaxAbs(plain.grads[i]) > 0.0 ? 1 : 0;
      EXPECT_TRUE(torch::equal(plain.grads[i], recomputed.grads[i]))
          << "parameter " << i << " differs by " << test_util::RelErr(recomputed.grads[i], plain.grads[i]);
    }
    // All but the head (Hidden stops before it) and an expert no token picked.
    EXPECT_GE(nonzero + 2, plain.grads.size()) << "the gradients compared are not zeros";
    EXPECT_TRUE(torch::equal(plain.rng_after, recomputed.rng_after)) << "the generator goes on as without it";
  }
}

// Without autograd (evaluation, sampling) or with a cache there is nothing
// to keep: the flag changes nothing.
TEST(LayerRecompute, DoesNothingWithoutAutograd) {
  LlamaModel m = MakeModel({"llama", "llama"});
  const torch::Tensor ids = RandomIds(2, 7, 279, 4);
  torch::NoGradGuard no_grad;
  ForwardOptions fo;
  fo.checkpoint_layers = true;
  const int64_t before = CheckpointedLayerCount();
  EXPECT_TRUE(torch::equal(m.Forward(ids, nullptr, fo), m.Forward(ids)));
  EXPECT_EQ(CheckpointedLayerCount(), before);
}

}  // namespace
}  // namespace burst
