// Tests of the Llama forward pass (llama.h) on random tiny models: shapes,
// causality, KV cache, batch independence, Hidden vs Forward, what gets
// gradients, tied embeddings and the selected-position loss.
//
// Numerical agreement with Hugging Face's definition is checked separately in
// parity_test.cpp against tests/reference/llama_ref.py.
#include "model/llama.h"

#include <gtest/gtest.h>

#include "model/presets.h"
#include "model/test_util.h"

namespace burst {
namespace {

using test_util::ExpectBurstError;
using test_util::RandomIds;
using test_util::RelErr;
using test_util::TinyConfig;

// Random tiny model with weights large enough that attention is not uniform.
LlamaModel TestModel(bool tied = false, uint64_t seed = 1) {
  torch::set_num_threads(1);
  LlamaModel m = LlamaModel::Random(TinyConfig(279, tied), seed, /*init_std=*/0.08);
  test_util::RandomizeNorms(m, seed + 100);
  return m;
}

// TestModel with rank-4 LoRA on every projection and random (non-zero) B
// matrices, so that the adapters change what the model computes.
LlamaModel AdaptedTestModel() {
  LlamaModel m = TestModel();
  LoraSpec spec;
  spec.rank = 4;
  m.AddLora(spec, 5);
  torch::NoGradGuard no_grad;
  auto gen = at::make_generator<at::CPUGeneratorImpl>(6);
  for (auto& [name, slot] : m.LoraWeightSlots()) {
    if (name.find("lora_B") != std::string::npos) slot->normal_(0.0, 0.1, gen);
  }
  return m;
}

TEST(Llama, OutputShapes) {
  LlamaModel m = TestModel();
  torch::NoGradGuard no_grad;
  torch::Tensor ids = RandomIds(3, 7, 279, 1);
  torch::Tensor logits = m.Forward(ids);
  EXPECT_EQ(logits.sizes().vec(), (std::vector<int64_t>{3, 7, 279}));
  EXPECT_EQ(logits.scalar_type(), torch::kFloat32);
  EXPECT_TRUE(torch::isfinite(logits).all().item<bool>());
  torch::Tensor hidden = m.Hidden(ids);
  EXPECT_EQ(hidden.sizes().vec(), (std::vector<int64_t>{3, 7, 64}));

  ForwardOptions last;
  last.last_only = true;
  torch::Tensor tail = m.Forward(ids, nullptr, last);
  EXPECT_EQ(tail.sizes().vec(), (std::vector<int64_t>{3, 1, 279}));
  EXPECT_LE(RelErr(tail.select(1, 0), logits.select(1, 6)), 1e-6);

  // One token.
  EXPECT_EQ(m.Forward(RandomIds(1, 1, 279, 2)).sizes().vec(), (std::vector<int64_t>{1, 1, 279}));
}

TEST(Llama, WeightShapesAndNames) {
  LlamaModel m = TestModel();
  NamedTensors w = m.BaseWeights();
  // embed + 9 per layer * 2 + norm + lm_head
  EXPECT_EQ(w.size(), 1u + 9u * 2u + 1u + 1u);
  std::map<std::string, torch::Tensor> by_name(w.begin(), w.end());
  EXPECT_EQ(by_name.at("model.embed_tokens.weight").sizes().vec(), (std::vector<int64_t>{279, 64}));
  EXPECT_EQ(by_name.at("model.layers.1.self_attn.q_proj.weight").sizes().vec(),
            (std::vector<int64_t>{64, 64}));
  EXPECT_EQ(by_name.at("model.layers.1.self_attn.k_proj.weight").sizes().vec(),
            (std::vector<int64_t>{32, 64}));
  EXPECT_EQ(by_name.at("model.layers.0.mlp.down_proj.weight").sizes().vec(), (std::vector<int64_t>{64, 176}));
  EXPECT_EQ(by_name.at("lm_head.weight").sizes().vec(), (std::vector<int64_t>{279, 64}));
  LlamaModel t = TestModel(/*tied=*/true);
  NamedTensors wt = t.BaseWeights();
  EXPECT_EQ(wt.size(), w.size() - 1);
  for (const auto& [name, tensor] : wt) EXPECT_NE(name, "lm_head.weight");
  // Same seed, same weights.
  LlamaModel m2 = TestModel();
  for (size_t i = 0; i < w.size(); ++i) EXPECT_TRUE(torch::equal(w[i].second, m2.BaseWeights()[i].second));
}

TEST(Llama, Causality) {
  LlamaModel m = TestModel();
  torch::NoGradGuard no_grad;
  torch::Tensor ids = RandomIds(2, 10, 279, 3);
  torch::Tensor base = m.Forward(ids);
  for (int64_t t : {0, 4, 9}) {
    SCOPED_TRACE(t);
    torch::Tensor changed = ids.clone();
    changed.index_put_({torch::indexing::Slice(), t},
                       (changed.index({torch::indexing::Slice(), t}) + 17) % 279);
    torch::Tensor out = m.Forward(changed);
    if (t > 0) {
      EXPECT_TRUE(torch::equal(out.narrow(1, 0, t), base.narrow(1, 0, t)))
          << "logits before the changed token moved";
    }
    // ... and the changed position and later ones do move.
    EXPECT_GT((out.narrow(1, t, 10 - t) - base.narrow(1, t, 10 - t)).abs().max().item<double>(), 1e-4);
  }
}

TEST(Llama, KvCacheMatchesFullForward) {
  for (bool tied : {false, true}) {
    SCOPED_TRACE(tied);
    LlamaModel m = TestModel(tied, 5);
    torch::NoGradGuard no_grad;
    torch::Tensor ids = RandomIds(2, 12, 279, 4);
    torch::Tensor full = m.Forward(ids);
    KVCache cache = m.NewCache(2, 16);
    std::vector<torch::Tensor> parts;
    parts.push_back(m.Forward(ids.narrow(1, 0, 5), &cache));
    EXPECT_EQ(cache.length, 5);
    for (int64_t t = 5; t < 12; ++t) parts.push_back(m.Forward(ids.narrow(1, t, 1), &cache));
    EXPECT_EQ(cache.length, 12);
    torch::Tensor cached = torch::cat(parts, 1);
    EXPECT_LE(RelErr(cached, full), 1e-5);

    // A multi-token continuation after the prefill also matches.
    KVCache cache2 = m.NewCache(2, 12);
    torch::Tensor a = m.Forward(ids.narrow(1, 0, 4), &cache2);
    torch::Tensor b = m.Forward(ids.narrow(1, 4, 8), &cache2);
    EXPECT_LE(RelErr(torch::cat({a, b}, 1), full), 1e-5);

    // Going past the capacity is an error, not a silent overwrite.
    ExpectBurstError([&] { m.Forward(ids.narrow(1, 0, 1), &cache2); }, Code::kResourceExhausted);
  }
}

TEST(Llama, HiddenThenHeadEqualsForward) {
  for (bool tied : {false, true}) {
    LlamaModel m = TestModel(tied, 6);
    torch::NoGradGuard no_grad;
    torch::Tensor ids = RandomIds(2, 9, 279, 5);
    torch::Tensor logits = m.Forward(ids);
    torch::Tensor via_hidden = torch::linear(m.Hidden(ids), m.lm_head);
    EXPECT_LE(RelErr(via_hidden, logits), 1e-6);
    // The head really is lm_head (embed when tied).
    if (tied) {
      EXPECT_LE(RelErr(torch::linear(m.Hidden(ids), m.embed), logits), 1e-6);
    }
  }
}

TEST(Llama, BatchRowsAreIndependent) {
  LlamaModel m = TestModel();
  torch::NoGradGuard no_grad;
  torch::Tensor ids = RandomIds(2, 11, 279, 6);
  torch::Tensor batch = m.Forward(ids);
  torch::Tensor row0 = m.Forward(ids.narrow(0, 0, 1));
  torch::Tensor row1 = m.Forward(ids.narrow(0, 1, 1));
  EXPECT_LE(RelErr(batch.narrow(0, 0, 1), row0), 1e-6);
  EXPECT_LE(RelErr(batch.narrow(0, 1, 1), row1), 1e-6);
  // The rows are different inputs, so they differ.
  EXPECT_GT(RelErr(row0, row1), 1e-3);
}

TEST(Llama, LoraStartsAsNoOpAndChangesOutputWhenBIsNonzero) {
  LlamaModel m = TestModel();
  torch::NoGradGuard no_grad;
  torch::Tensor ids = RandomIds(1, 8, 279, 7);
  torch::Tensor base = m.Forward(ids);
  LoraSpec spec;
  spec.rank = 4;
  spec.alpha = 8;
  m.AddLora(spec, 11);
  NamedTensors lw = m.LoraWeights();
  EXPECT_EQ(lw.size(), 2u * 7u * 2u);
  for (const auto& [name, t] : lw) {
    if (name.find("lora_B") != std::string::npos) {
      EXPECT_EQ(test_util::MaxAbs(t), 0.0) << name;
    } else {
      EXPECT_GT(t.abs().max().item<double>(), 0.0) << name;
      EXPECT_EQ(t.size(0), 4) << name;
    }
  }
  EXPECT_TRUE(torch::equal(m.Forward(ids), base)) << "fresh LoRA (B = 0) must not change logits";
  test_util::RandomizeLora(m, 3);
  EXPECT_GT(RelErr(m.Forward(ids), base), 1e-4);
}

// Weighted mean CE of next-token prediction, via SelectedLogProbs.
torch::Tensor Loss(const LlamaModel& m, const torch::Tensor& ids) {
  const int64_t t = ids.size(1);
  torch::Tensor hidden = m.Hidden(ids).narrow(1, 0, t - 1);
  torch::Tensor targets = ids.narrow(1, 1, t - 1);
  torch::Tensor w = torch::ones(targets.sizes());
  TargetLogProbs sel = SelectedLogProbs(m, hidden, targets, w);
  return -(sel.logp * sel.weights).sum() / w.sum();
}

TEST(Llama, LoraTrainingGradientsReachOnlyLora) {
  LlamaModel m = TestModel();
  LoraSpec spec;
  spec.rank = 4;
  spec.alpha = 8;
  m.AddLora(spec, 12);
  test_util::RandomizeLora(m, 4);
  m.SetTrainable(false);
  EXPECT_EQ(m.TrainableParameters().size(), 2u * 7u * 2u);
  torch::Tensor loss = Loss(m, RandomIds(2, 9, 279, 8));
  loss.backward();
  for (const auto& [name, t] : m.BaseWeights()) {
    EXPECT_FALSE(t.requires_grad()) << name;
    EXPECT_FALSE(t.grad().defined()) << name;
  }
  for (const auto& [name, t] : m.LoraWeights()) {
    ASSERT_TRUE(t.grad().defined()) << name;
    EXPECT_GT(t.grad().abs().max().item<double>(), 0.0) << name;
    EXPECT_EQ(t.grad().sizes(), t.sizes()) << name;
  }
}

TEST(Llama, FullTrainingGradientsReachEveryBaseWeight) {
  for (bool tied : {false, true}) {
    SCOPED_TRACE(tied);
    LlamaModel m = TestModel(tied, 9);
    LoraSpec spec;
    spec.rank = 2;
    m.AddLora(spec, 13);
    m.SetTrainable(true);
    const size_t n_base = m.BaseWeights().size();
    EXPECT_EQ(m.TrainableParameters().size(), n_base);
    if (tied) {
      EXPECT_EQ(m.lm_head.data_ptr(), m.embed.data_ptr());
    }
    torch::Tensor loss = Loss(m, RandomIds(2, 9, 279, 9));
    loss.backward();
    for (const auto& [name, t] : m.BaseWeights()) {
      ASSERT_TRUE(t.grad().defined()) << name;
      EXPECT_GT(t.grad().abs().max().item<double>(), 0.0) << name;
    }
    for (const auto& [name, t] : m.LoraWeights()) {
      EXPECT_FALSE(t.requires_grad()) << name;
      EXPECT_FALSE(t.grad().defined()) << name;
    }
  }
}

TEST(Llama, TiedEmbeddingsShareStorage) {
  LlamaModel m = TestModel(/*tied=*/true);
  EXPECT_EQ(m.lm_head.data_ptr(), m.embed.data_ptr());
  m.To(torch::kCPU);
  EXPECT_EQ(m.lm_head.data_ptr(), m.embed.data_ptr());
  m.SetTrainable(true);
  EXPECT_EQ(m.lm_head.data_ptr(), m.embed.data_ptr());
  // Writing through embed changes the head's logits.
  torch::NoGradGuard no_grad;
  torch::Tensor ids = RandomIds(1, 4, 279, 10);
  torch::Tensor before = m.Forward(ids);
  m.embed.mul_(1.5);
  EXPECT_GT(RelErr(m.Forward(ids), before), 1e-3);
  // Untied: distinct storage.
  LlamaModel u = TestModel(false);
  u.To(torch::kCPU);
  EXPECT_NE(u.lm_head.data_ptr(), u.embed.data_ptr());
}

TEST(Llama, SelectedLogProbsMatchWeightedNll) {
  LlamaModel m = TestModel(false, 14);
  torch::NoGradGuard no_grad;
  const int64_t b = 2, t = 10;
  torch::Tensor ids = RandomIds(b, t, 279, 11);
  auto gen = at::make_generator<at::CPUGeneratorImpl>(12);
  torch::Tensor w = torch::randint(2, {b, t - 1}, gen).to(torch::kFloat32) *
                    torch::rand({b, t - 1}, gen).add(0.5);  // 0 or in [0.5, 1.5)
  w.index_put_({0, 0}, 1.0);
  torch::Tensor targets = ids.narrow(1, 1, t - 1);
  torch::Tensor logits = m.Forward(ids).narrow(1, 0, t - 1);
  torch::Tensor nll = WeightedNllSum(logits, targets, w);
  TargetLogProbs sel = SelectedLogProbs(m, m.Hidden(ids).narrow(1, 0, t - 1), targets, w,
                                        /*with_hits=*/true);
  const int64_t n = (w != 0).sum().item<int64_t>();
  ASSERT_EQ(sel.logp.size(0), n);
  ASSERT_EQ(sel.rows.size(0), n);
  torch::Tensor ours = (sel.logp * sel.weights).sum();
  EXPECT_LE(RelErr(ours, -nll), 1e-5) << ours.item<double>() << " vs " << -nll.item<double>();
  // Per-row: each logp equals log_softmax of the full logits at that row.
  torch::Tensor flat = torch::log_softmax(logits.reshape({-1, 279}), -1);
  torch::Tensor expect = flat.index_select(0, sel.rows)
                             .gather(1, targets.reshape({-1}).index_select(0, sel.rows).unsqueeze(1))
                             .squeeze(1);
  EXPECT_LE(RelErr(sel.logp, expect), 1e-5);
  EXPECT_TRUE(torch::equal(sel.weights, w.reshape({-1}).index_select(0, sel.rows)));
  EXPECT_TRUE(torch::all(w.reshape({-1}).index_select(0, sel.rows) != 0).item<bool>());
  torch::Tensor hits =
      flat.index_select(0, sel.rows).argmax(-1) == targets.reshape({-1}).index_select(0, sel.rows);
  EXPECT_TRUE(torch::equal(sel.hit, hits));
}

// The hand-written LM-head backward (lm_head.cpp) against autograd through
// the plain linear -> log_softmax -> gather, on rows with zero weight mixed in.
TEST(Llama, SelectedLogProbsGradientsMatchAutograd) {
  auto gen = at::make_generator<at::CPUGeneratorImpl>(21);
  const int64_t b = 3, t = 7, c = 16, v = 50;
  torch::Tensor hidden0 = torch::randn({b, t, c}, gen);
  torch::Tensor head0 = torch::randn({v, c}, gen) * 0.3;
  torch::Tensor targets = torch::randint(v, {b, t}, gen);
  torch::Tensor w = torch::randint(2, {b, t}, gen).to(torch::kFloat32) * torch::rand({b, t}, gen);
  w.index_put_({0, 0}, 1.0);
  w.index_put_({2, 6}, 0.0);

  LlamaModel m;
  m.lm_head = head0.clone().set_requires_grad(true);
  torch::Tensor hidden = hidden0.clone().set_requires_grad(true);
  TargetLogProbs sel = SelectedLogProbs(m, hidden, targets, w);
  (sel.logp * sel.weights).sum().backward();

  torch::Tensor hidden_ref = hidden0.clone().set_requires_grad(true);
  torch::Tensor head_ref = head0.clone().set_requires_grad(true);
  torch::Tensor logits = torch::linear(hidden_ref, head_ref);  // (B, T, V)
  torch::Tensor logp = torch::log_softmax(logits, -1).gather(2, targets.unsqueeze(2)).squeeze(2);
  (logp * w).sum().backward();

  EXPECT_LE(RelErr(hidden.grad(), hidden_ref.grad()), 1e-5);
  EXPECT_LE(RelErr(m.lm_head.grad(), head_ref.grad()), 1e-5);
  // Rows without weight get exactly zero gradient.
  EXPECT_EQ(hidden.grad()[2][6].abs().sum().item<float>(), 0.0f);
  // The saved buffer becomes the gradient, so a second backward is refused.
  torch::Tensor hidden2 = hidden0.clone().set_requires_grad(true);
  torch::Tensor loss2 = SelectedLogProbs(m, hidden2, targets, w).logp.sum();
  loss2.backward({}, /*retain_graph=*/true);
  EXPECT_ANY_THROW(loss2.backward());
}

// A frozen bfloat16 base (FreezeBaseAs, the GPU's LoRA runs): the head
// computes the logits in bfloat16, the log-softmax and the gradient reaching
// the float32 hidden states stay float32 and agree with the float32 head to
// bfloat16's precision. The hidden states' gradient keeps their dtype.
TEST(Llama, SelectedLogProbsWithABfloat16Head) {
  auto gen = at::make_generator<at::CPUGeneratorImpl>(22);
  const int64_t b = 2, t = 5, c = 32, v = 64;
  torch::Tensor hidden0 = torch::randn({b, t, c}, gen);
  torch::Tensor targets = torch::randint(v, {b, t}, gen);
  torch::Tensor w = torch::ones({b, t});
  LlamaModel m;
  m.lm_head = (torch::randn({v, c}, gen) * 0.3).to(torch::kBFloat16);
  LlamaModel ref;
  ref.lm_head = m.lm_head.to(torch::kFloat32);

  torch::Tensor hidden = hidden0.clone().set_requires_grad(true);
  TargetLogProbs sel = SelectedLogProbs(m, hidden, targets, w);
  EXPECT_EQ(sel.logp.scalar_type(), torch::kFloat32);
  sel.logp.sum().backward();
  torch::Tensor hidden_ref = hidden0.clone().set_requires_grad(true);
  TargetLogProbs sel_ref = SelectedLogProbs(ref, hidden_ref, targets, w);
  sel_ref.logp.sum().backward();

  EXPECT_LE(RelErr(sel.logp, sel_ref.logp), 2e-2);
  EXPECT_EQ(hidden.grad().scalar_type(), torch::kFloat32);
  EXPECT_LE(RelErr(hidden.grad(), hidden_ref.grad()), 3e-2);
  EXPECT_FALSE(m.lm_head.grad().defined());  // the frozen head gets none
}

TEST(Llama, FreezeBaseAsCastsTheBaseAndKeepsTheAdapters) {
  LlamaModel m = TestModel(/*tied=*/true);
  LoraSpec spec;
  m.AddLora(spec, 3);
  m.FreezeBaseAs(torch::kBFloat16);
  for (const auto& [name, w] : m.BaseWeights()) {
    EXPECT_EQ(w.scalar_type(), torch::kBFloat16) << name;
    EXPECT_FALSE(w.requires_grad()) << name;
  }
  for (const auto& [name, w] : m.LoraWeights()) EXPECT_EQ(w.scalar_type(), torch::kFloat32) << name;
  EXPECT_TRUE(m.lm_head.is_same(m.embed));  // still tied
  EXPECT_TRUE(m.layers[0].q_proj.is_alias_of(m.layers[0].qkv_proj));
  EXPECT_TRUE(m.layers[0].up_proj.is_alias_of(m.layers[0].gate_up_proj));
  // Moving or merging makes new weights: the fused matrices go with the old ones.
  LlamaModel moved = m;
  moved.To(torch::kCPU);
  EXPECT_FALSE(moved.layers[0].qkv_proj.defined());
  EXPECT_EQ(moved.layers[0].q_proj.scalar_type(), torch::kFloat32);
  LlamaModel merged = m;
  merged.MergeLora();
  EXPECT_FALSE(merged.layers[0].gate_up_proj.defined());
}

// FreezeBaseAs fuses q/k/v and gate/up into one matrix each: the forward
// and the adapters' gradients are the unfused model's, and a weight replaced
// afterwards (a loader, MergeLora) makes that layer run unfused again.
TEST(Llama, FusedProjectionsMatchTheUnfusedModel) {
  LlamaModel m = AdaptedTestModel();
  LlamaModel fused = m;
  fused.FreezeBaseAs(torch::kFloat32);
  ASSERT_TRUE(fused.layers[0].qkv_proj.defined());
  EXPECT_TRUE(fused.layers[0].k_proj.is_alias_of(fused.layers[0].qkv_proj));
  const torch::Tensor ids = RandomIds(2, 9, m.config.vocab_size, 7);
  auto grads = [&](LlamaModel& model) {
    model.SetTrainable(false);
    for (auto& [name, w] : model.LoraWeights()) w.mutable_grad() = torch::Tensor();
    torch::Tensor logits = model.Forward(ids);
    logits.pow(2).mean().backward();
    std::vector<torch::Tensor> out = {logits.detach()};
    for (auto& [name, w] : model.LoraWeights()) out.push_back(w.grad().clone());
    return out;
  };
  std::vector<torch::Tensor> want = grads(m), got = grads(fused);
  ASSERT_EQ(want.size(), got.size());
  for (size_t i = 0; i < want.size(); ++i) EXPECT_LE(RelErr(got[i], want[i]), 1e-5) << i;
  // Replacing one block's weight unfuses that layer; the result follows the new weight.
  fused.layers[1].v_proj = fused.layers[1].v_proj.clone() * 2;
  m.layers[1].v_proj = m.layers[1].v_proj.clone() * 2;
  torch::NoGradGuard no_grad;
  EXPECT_LE(RelErr(fused.Forward(ids), m.Forward(ids)), 1e-5);
}

// Sequences packed end to end (ForwardOptions::seq_lens) get, token for
// token, the hidden states and the gradients of rows of their own.
TEST(Llama, SequencesPackedEndToEndMatchRowsOfTheirOwn) {
  LlamaModel m = AdaptedTestModel();
  m.SetTrainable(false);
  const std::vector<int64_t> lens = {7, 1, 12, 3};
  std::vector<torch::Tensor> seqs;
  for (size_t i = 0; i < lens.size(); ++i) seqs.push_back(RandomIds(1, lens[i], m.config.vocab_size, 20 + i));
  // Each token's hidden state times a fixed random weight: a loss that
  // reaches every position.
  const torch::Tensor probe =
      torch::randn({m.config.hidden_size}, at::make_generator<at::CPUGeneratorImpl>(9));
  auto grads = [&](const std::function<std::vector<torch::Tensor>()>& forward) {
    for (auto& [name, w] : m.LoraWeights()) w.mutable_grad() = torch::Tensor();
    std::vector<torch::Tensor> hidden = forward();
    torch::Tensor loss = torch::zeros({});
    for (const torch::Tensor& h : hidden) loss = loss + (h * probe).sum();
    loss.backward();
    std::vector<torch::Tensor> out;
    for (const torch::Tensor& h : hidden) out.push_back(h.detach());
    for (auto& [name, w] : m.LoraWeights()) out.push_back(w.grad().clone());
    return out;
  };
  std::vector<torch::Tensor> want = grads([&] {
    std::vector<torch::Tensor> out;
    for (const torch::Tensor& ids : seqs) out.push_back(m.Hidden(ids).squeeze(0));  // (L, C)
    return out;
  });
  std::vector<torch::Tensor> got = grads([&] {
    ForwardOptions fo;
    fo.seq_lens = lens;
    torch::Tensor hidden = m.Hidden(torch::cat(seqs, 1), nullptr, fo).squeeze(0);  // (N, C)
    std::vector<torch::Tensor> out;
    int64_t at = 0;
    for (int64_t n : lens) {
      out.push_back(hidden.narrow(0, at, n));
      at += n;
    }
    return out;
  });
  ASSERT_EQ(want.size(), got.size());
  for (size_t i = 0; i < want.size(); ++i) EXPECT_LE(RelErr(got[i], want[i]), 1e-5) << i;
  // Packed but attending across sequences (one plain row) would differ.
  torch::NoGradGuard no_grad;
  EXPECT_GT(RelErr(m.Hidden(torch::cat(seqs, 1)).squeeze(0).narrow(0, 8, 12), want[2]), 1e-3);
  ForwardOptions bad;
  bad.seq_lens = {7, 1};
  ExpectBurstError([&] { m.Hidden(torch::cat(seqs, 1), nullptr, bad); }, Code::kInternal,
                   {"packed end to end"});
}

// ForwardOptions::outputs: the rows asked for get the hidden states of the
// full forward, and a loss on them the same LoRA gradients (the last layer
// runs its output projection and MLP on those rows only), for a padded
// (B, T) batch and for sequences packed end to end.
TEST(Llama, OutputsOfSomePositionsMatchTheFullForward) {
  LlamaModel m = AdaptedTestModel();
  m.FreezeBaseAs(torch::kFloat32);  // fused q/k/v and gate/up, as LoadModel leaves a model
  m.SetTrainable(false);
  const torch::Tensor probe =
      torch::randn({m.config.hidden_size}, at::make_generator<at::CPUGeneratorImpl>(9));
  auto run = [&](const torch::Tensor& ids, ForwardOptions fo, const torch::Tensor& rows) {
    for (auto& [name, w] : m.LoraWeights()) w.mutable_grad() = torch::Tensor();
    torch::Tensor h = m.Hidden(ids, nullptr, fo);
    if (!fo.outputs.defined()) h = h.reshape({-1, h.size(-1)}).index_select(0, rows);  // (M, C)
    h = h.reshape({-1, h.size(-1)});
    (h * probe).sum().backward();
    std::vector<torch::Tensor> out = {h.detach()};
    for (auto& [name, w] : m.LoraWeights()) out.push_back(w.grad().clone());
    return out;
  };
  const torch::Tensor rows = torch::tensor(std::vector<int64_t>{0, 4, 5, 11, 17, 20, 21});
  // Padded: (3, 8), flat positions across rows.
  const torch::Tensor padded = RandomIds(3, 8, m.config.vocab_size, 30);
  ForwardOptions some;
  some.outputs = rows;
  std::vector<torch::Tensor> want = run(padded, {}, rows), got = run(padded, some, rows);
  ASSERT_EQ(got[0].sizes(), torch::IntArrayRef({7, m.config.hidden_size}));
  for (size_t i = 0; i < want.size(); ++i) EXPECT_LE(RelErr(got[i], want[i]), 1e-5) << "padded " << i;
  // Packed end to end.
  const torch::Tensor packed = RandomIds(1, 22, m.config.vocab_size, 31);
  ForwardOptions varlen;
  varlen.seq_lens = {6, 1, 10, 5};
  ForwardOptions varlen_some = varlen;
  varlen_some.outputs = rows;
  want = run(packed, varlen, rows);
  got = run(packed, varlen_some, rows);
  for (size_t i = 0; i < want.size(); ++i) EXPECT_LE(RelErr(got[i], want[i]), 1e-5) << "packed " << i;
  // Not with a cache.
  KVCache cache = m.NewCache(1, 32);
  torch::NoGradGuard no_grad;
  ExpectBurstError([&] { m.Hidden(packed, &cache, some); }, Code::kInternal, {"outputs"});
}

// The GPU benchmarks' shapes have the parameter counts of the models they name.
TEST(Llama, Llama3PresetsHaveTheirModelsSizes) {
  const LlamaConfig small = PresetConfig("llama3.2-1b", 0);
  const LlamaConfig big = PresetConfig("llama3.1-8b", 0);
  EXPECT_EQ(small.NumParameters(), 1235814400);  // Llama-3.2-1B
  EXPECT_EQ(big.NumParameters(), 8030261248);    // Llama-3.1-8B
  EXPECT_EQ(small.rope_scaling["rope_type"], "llama3");
  EXPECT_EQ(big.head_dim, 128);
}

}  // namespace
}  // namespace burst
