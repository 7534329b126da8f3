// A training loop run's arithmetic: each loss's value and gradient
// against a float64 PyTorch reference (tests/reference/loop_ref.py with
// the project's .venv), gradient accumulation across calls, AdamW with
// clipping against torch.optim.AdamW, and save/load reproducing the next
// step exactly.
#include "train/loop_run.h"

#include <gtest/gtest.h>

#include <cstdlib>

#include "core/fs.h"
#include "model/presets.h"
#include "model/sampler.h"
#include "model/test_util.h"
#include "model/tokenizer.h"
#include "train/test_util.h"

namespace burst {
namespace {

using test_util::RelErr;

// Runs loop_ref.py MODE on `in`, returns its output.
Json Reference(const std::string& mode, const Json& in) {
  test_util::TempDir dir("burst_loop_ref_");
  WriteFileAtomic(dir / "in.json", in.dump());
  const std::string cmd = BURST_PYTHON " '" + std::string(BURST_SOURCE_DIR) +
                          "/tests/reference/loop_ref.py' " + mode + " '" + (dir / "in.json").string() +
                          "' '" + (dir / "out.json").string() + "' 2>'" + (dir / "err").string() + "'";
  if (std::system(cmd.c_str()) != 0) {
    ADD_FAILURE() << "reference failed: " << cmd << "\n" << ReadFile(dir / "err");
    return Json();
  }
  return Json::parse(ReadFile(dir / "out.json"));
}

std::vector<double> Values(const torch::Tensor& t) {
  torch::Tensor c = t.detach().to(torch::kFloat64).contiguous().reshape({-1});
  return std::vector<double>(c.data_ptr<double>(), c.data_ptr<double>() + c.numel());
}

torch::Tensor FromJson(const Json& v) { return torch::tensor(v.get<std::vector<double>>(), torch::kFloat64); }

TEST(LoopLoss, EachLossAndItsGradientMatchTheFloat64Reference) {
  constexpr int64_t n = 41;
  auto gen = at::make_generator<at::CPUGeneratorImpl>(7);
  auto opts = torch::TensorOptions().dtype(torch::kFloat64);
  // Log-probabilities near the sampler's, so ratios land on both sides of the clip range.
  torch::Tensor q = -torch::rand({n}, gen, c10::nullopt, opts) * 3.0;
  torch::Tensor lp0 = q + torch::randn({n}, gen, opts) * 0.3;
  torch::Tensor adv = torch::randn({n}, gen, opts);
  torch::Tensor w = (torch::rand({n}, gen, c10::nullopt, opts) > 0.3).to(torch::kFloat64) * 0.7;
  struct Case {
    std::string fn;
    Json config;
    bool per_token_clip = false;
  };
  const std::vector<Case> cases = {{"cross_entropy", Json()},
                                   {"importance_sampling", Json()},
                                   {"ppo", Json()},
                                   {"ppo", {{"clip_low_threshold", 0.9}, {"clip_high_threshold", 1.05}}},
                                   {"ppo", Json(), true},
                                   {"cispo", Json()},
                                   {"cispo", {{"clip_low_threshold", 0.95}, {"clip_high_threshold", 1.1}}},
                                   {"dro", Json()},
                                   {"dro", {{"beta", 0.5}}}};
  Json in = {{"cases", Json::array()}};
  std::vector<std::pair<std::vector<double>, std::vector<double>>> ours;
  for (const Case& c : cases) {
    std::map<std::string, double> config = ParseLossConfig(c.fn, c.config, "loss_fn_config");
    std::map<std::string, torch::Tensor> inputs;
    if (c.fn == "cross_entropy") {
      inputs["weights"] = w;
    } else {
      inputs["logprobs"] = q;
      inputs["advantages"] = adv;
    }
    if (c.per_token_clip) {
      inputs["clip_low_threshold"] = 0.7 + 0.25 * torch::rand({n}, gen, c10::nullopt, opts);
      inputs["clip_high_threshold"] = 1.02 + 0.3 * torch::rand({n}, gen, c10::nullopt, opts);
    }
    torch::Tensor lp = lp0.clone().requires_grad_(true);
    torch::Tensor loss = LoopTokenLoss(c.fn, lp, inputs, config);
    loss.sum().backward();
    ours.emplace_back(Values(loss), Values(lp.grad()));
    Json jc = {{"loss_fn", c.fn}, {"config", config}, {"lp", Values(lp0)}, {"inputs", Json::object()}};
    for (auto& [k, v] : inputs) jc["inputs"][k] = Values(v);
    in["cases"].push_back(jc);
  }
  Json ref = Reference("losses", in);
  ASSERT_EQ(ref["cases"].size(), cases.size());
  for (size_t i = 0; i < cases.size(); ++i) {
    const std::string name = cases[i].fn + " #" + std::to_string(i);
    torch::Tensor rl = FromJson(ref["cases"][i]["loss"]), rg = FromJson(ref["cases"][i]["grad"]);
    torch::Tensor ol = torch::tensor(ours[i].first, torch::kFloat64),
                  og = torch::tensor(ours[i].second, torch::kFloat64);
    EXPECT_LE(RelErr(ol, rl), 1e-6) << name << " loss";
    EXPECT_LE(RelErr(og, rg), 1e-6) << name << " gradient";
    EXPECT_GT(test_util::MaxAbs(rg), 0.0) << name << ": a gradient of zero tests nothing";
  }
}

// ----------------------------------------------------------------------------
// runs on a tiny random model

class LoopRunTest : public ::testing::Test {
 protected:
  void SetUp() override {
    torch::manual_seed(0);
    base_ = LlamaModel::Random(PresetConfig("tiny", 97), 3, 0.1);
    lora_.rank = 4;
    lora_.seed = 11;
  }

  // A datum of `len` tokens: target = next token, the last `len/2` weighted.
  LoopDatum Datum(int64_t len, uint64_t seed, bool rl = false) {
    auto gen = at::make_generator<at::CPUGeneratorImpl>(seed);
    torch::Tensor ids = torch::randint(0, 97, {len + 1}, gen);
    LoopDatum d;
    for (int64_t i = 0; i < len; ++i) {
      d.tokens.push_back(ids[i].item<int64_t>());
      d.targets.push_back(ids[i + 1].item<int64_t>());
    }
    if (rl) {
      d.inputs["logprobs"] = std::vector<float>(static_cast<size_t>(len), -4.6f);
      std::vector<float> adv(static_cast<size_t>(len), 0.0f);
      for (int64_t i = len / 2; i < len; ++i) adv[static_cast<size_t>(i)] = (seed % 2 ? 1.0f : -0.5f);
      d.inputs["advantages"] = adv;
    } else {
      std::vector<float> w(static_cast<size_t>(len), 0.0f);
      for (int64_t i = len / 2; i < len; ++i) w[static_cast<size_t>(i)] = 1.0f;
      d.inputs["weights"] = w;
    }
    return d;
  }

  static std::map<std::string, torch::Tensor> Grads(const LoopRun& s) {
    std::map<std::string, torch::Tensor> out;
    for (const auto& [name, t] : s.model().LoraWeights()) {
      EXPECT_TRUE(t.grad().defined()) << name;
      if (t.grad().defined()) out[name] = t.grad().clone();
    }
    return out;
  }

  LlamaModel base_;
  LoopLoraOptions lora_;
};

TEST_F(LoopRunTest, LoraFlagsChooseTheTargets) {
  LoopLoraOptions o = lora_;
  o.train_mlp = false;
  LoopRun s(base_, o);
  bool head = false, mlp = false;
  for (const auto& [name, t] : s.model().LoraWeights()) {
    head |= name.find("lm_head") != std::string::npos;
    mlp |= name.find("mlp") != std::string::npos;
  }
  EXPECT_TRUE(head);
  EXPECT_FALSE(mlp);
  o.train_attn = o.train_unembed = false;
  test_util::ExpectBurstError([&] { LoopRun none(base_, o); }, Code::kInvalidArgument, {"trains nothing"});
}

TEST_F(LoopRunTest, GradientsAccumulateAcrossCallsAsOneCallOnTheUnion) {
  std::vector<LoopDatum> a = {Datum(9, 1), Datum(5, 2)}, b = {Datum(12, 3)};
  std::vector<LoopDatum> all = {a[0], a[1], b[0]};
  const auto config = ParseLossConfig("cross_entropy", Json(), "c");
  LoopRun split(base_, lora_), joint(base_, lora_);
  // Nonzero B everywhere, so every pair's gradient is nonzero.
  for (LoopRun* s : {&split, &joint}) {
    torch::NoGradGuard g;
    for (auto& [name, slot] : s->mutable_model().LoraWeightSlots())
      if (name.find("lora_B") != std::string::npos) test_util::FillNormal(*slot, 5, 0.0, 0.05);
  }
  LoopForwardResult r1 = split.Forward(a, "cross_entropy", config, true);
  LoopForwardResult r2 = split.Forward(b, "cross_entropy", config, true);
  LoopForwardResult rj = joint.Forward(all, "cross_entropy", config, true);
  EXPECT_NEAR(r1.loss_sum + r2.loss_sum, rj.loss_sum, 1e-5 * std::abs(rj.loss_sum));
  ASSERT_EQ(rj.outputs.size(), 3u);
  // Padding leaves a datum's logprobs as they were alone (to float32
  // rounding: the batch's GEMMs block differently).
  const auto& alone = r2.outputs[0].at("logprobs");
  const auto& batched = rj.outputs[2].at("logprobs");
  ASSERT_EQ(alone.size(), batched.size());
  for (size_t i = 0; i < alone.size(); ++i) EXPECT_NEAR(alone[i], batched[i], 1e-5) << "token " << i;
  auto gs = Grads(split), gj = Grads(joint);
  ASSERT_EQ(gs.size(), gj.size());
  for (auto& [name, g] : gs) {
    EXPECT_GT(test_util::MaxAbs(g), 0.0) << name;
    EXPECT_LE(RelErr(g, gj.at(name)), 1e-5) << name;
  }
  // The loss is the sum of -w lp: weights 0 contribute nothing.
  double sum = 0.0;
  for (size_t i = 0; i < all.size(); ++i)
    for (size_t t = 0; t < all[i].tokens.size(); ++t)
      sum += -all[i].inputs.at("weights")[t] * rj.outputs[i].at("logprobs")[t];
  EXPECT_NEAR(sum, rj.loss_sum, 1e-4);
}

// Tokens whose loss term has no gradient (weight or advantage 0) skip the
// LM head's backward; the logprobs, the loss and the gradients are what the
// backward through every token gives (weights of 1e-30 there instead of 0
// make every token need one).
TEST_F(LoopRunTest, TokensWithoutAGradientSkipTheHeadsBackwardAndChangeNothing) {
  for (const bool rl : {false, true}) {
    const std::string loss = rl ? "importance_sampling" : "cross_entropy";
    const char* input = rl ? "advantages" : "weights";
    std::vector<LoopDatum> sparse = {Datum(9, 1, rl), Datum(14, 2, rl)}, dense = sparse;
    for (auto& d : dense)
      for (float& w : d.inputs.at(input))
        if (w == 0.0F) w = 1e-30F;
    const auto config = ParseLossConfig(loss, Json(), "c");
    LoopRun a(base_, lora_), b(base_, lora_);
    for (LoopRun* s : {&a, &b}) {
      torch::NoGradGuard g;
      for (auto& [name, slot] : s->mutable_model().LoraWeightSlots())
        if (name.find("lora_B") != std::string::npos) test_util::FillNormal(*slot, 5, 0.0, 0.05);
    }
    LoopForwardResult ra = a.Forward(sparse, loss, config, true), rb = b.Forward(dense, loss, config, true);
    EXPECT_NEAR(ra.loss_sum, rb.loss_sum, 1e-5 * std::abs(rb.loss_sum)) << loss;
    for (size_t i = 0; i < sparse.size(); ++i) {
      const auto &la = ra.outputs[i].at("logprobs"), &lb = rb.outputs[i].at("logprobs");
      ASSERT_EQ(la.size(), lb.size());
      for (size_t t = 0; t < la.size(); ++t) EXPECT_NEAR(la[t], lb[t], 1e-5) << loss << " datum " << i;
    }
    auto ga = Grads(a), gb = Grads(b);
    ASSERT_EQ(ga.size(), gb.size());
    for (auto& [name, g] : ga) {
      EXPECT_GT(test_util::MaxAbs(g), 0.0) << loss << " " << name;
      EXPECT_LE(RelErr(g, gb.at(name)), 1e-5) << loss << " " << name;
    }
  }
}

// A group of completions of one prompt (packed into one row, the prompt
// computed once) gets the logprobs, losses and gradients it gets with one
// row per datum, mixed with a datum that shares nothing; and it feeds fewer
// tokens through the model.
TEST_F(LoopRunTest, DatumsSharingAPromptGetWhatEachGetsInARowOfItsOwn) {
  const LoopDatum prompt = Datum(40, 11, true);
  std::vector<LoopDatum> data;
  for (uint64_t k = 0; k < 4; ++k) {
    LoopDatum d = prompt, tail = Datum(3 + static_cast<int64_t>(k), 50 + k, true);
    for (const char* name : {"logprobs", "advantages"}) {
      auto& v = d.inputs[name];
      v.assign(v.size(), 0.0f);  // the prompt's tokens carry no loss, as a sampled completion's
      v.insert(v.end(), tail.inputs[name].begin(), tail.inputs[name].end());
    }
    d.inputs["advantages"].back() = k % 2 ? 1.0f : -1.0f;
    d.tokens.insert(d.tokens.end(), tail.tokens.begin(), tail.tokens.end());
    d.targets.back() = tail.tokens.front();  // the prompt's last token predicts the completion's first
    d.targets.insert(d.targets.end(), tail.targets.begin(), tail.targets.end());
    data.push_back(d);
  }
  data.insert(data.begin() + 2, Datum(30, 12, true));
  const auto config = ParseLossConfig("ppo", Json(), "c");
  LoopRun packed(base_, lora_), apart(base_, lora_);
  for (LoopRun* s : {&packed, &apart}) {
    torch::NoGradGuard g;
    for (auto& [name, slot] : s->mutable_model().LoraWeightSlots())
      if (name.find("lora_B") != std::string::npos) test_util::FillNormal(*slot, 5, 0.0, 0.05);
  }
  LoopForwardResult together = packed.Forward(data, "ppo", config, true);
  EXPECT_EQ(together.tokens, 4 * 40 + 3 + 4 + 5 + 6 + 30);
  EXPECT_EQ(together.fed_tokens, 40 + 3 + 4 + 5 + 6 + 30) << "the prompt fed once";
  double loss_apart = 0.0;
  for (size_t i = 0; i < data.size(); ++i) {
    LoopForwardResult alone = apart.Forward({data[i]}, "ppo", config, true);
    EXPECT_EQ(alone.fed_tokens, alone.tokens);
    loss_apart += alone.loss_sum;
    for (const char* what : {"logprobs", "elementwise_loss"}) {
      const auto& a = alone.outputs[0].at(what);
      const auto& b = together.outputs[i].at(what);
      ASSERT_EQ(a.size(), b.size());
      for (size_t t = 0; t < a.size(); ++t)
        EXPECT_NEAR(a[t], b[t], 1e-5) << what << " datum " << i << " token " << t;
    }
  }
  EXPECT_NEAR(together.loss_sum, loss_apart, 1e-5 * std::max(1.0, std::abs(loss_apart)));
  auto gp = Grads(packed), ga = Grads(apart);
  ASSERT_EQ(gp.size(), ga.size());
  for (auto& [name, g] : gp) {
    EXPECT_GT(test_util::MaxAbs(g), 0.0) << name;
    EXPECT_LE(RelErr(g, ga.at(name)), 1e-4) << name;
  }
}

TEST_F(LoopRunTest, ThreeOptimStepsMatchTorchAdamWWithClipping) {
  LoopRun s(base_, lora_);
  Json in = {{"params", Json::object()}, {"steps", Json::array()}};
  for (const auto& [name, t] : s.model().LoraWeights())
    in["params"][name] = {{"shape", t.sizes().vec()}, {"data", Values(t)}};
  const std::vector<LoopAdamParams> steps = {
      {1e-2, 0.9, 0.95, 1e-12, 0.0, 0.0},
      {2e-2, 0.8, 0.99, 1e-8, 0.1, 1e-3},  // clipping active (the norm is larger)
      {5e-3, 0.9, 0.95, 1e-12, 0.01, 10.0}};
  double clipped_norm = 0.0;
  for (size_t k = 0; k < steps.size(); ++k) {
    s.Forward({Datum(10, 20 + k, true), Datum(7, 30 + k, true)}, "importance_sampling",
              ParseLossConfig("importance_sampling", Json(), "c"), true);
    Json grads = Json::object();
    for (auto& [name, g] : Grads(s)) grads[name] = Values(g);
    const LoopAdamParams& p = steps[k];
    in["steps"].push_back({{"adam",
                            {{"learning_rate", p.learning_rate},
                             {"beta1", p.beta1},
                             {"beta2", p.beta2},
                             {"eps", p.eps},
                             {"weight_decay", p.weight_decay},
                             {"grad_clip_norm", p.grad_clip_norm}}},
                           {"grads", grads}});
    Json m = s.OptimStep(p);
    if (k == 1) clipped_norm = m["grad_norm"].get<double>();
    EXPECT_EQ(m["step"], static_cast<int64_t>(k + 1));
  }
  EXPECT_GT(clipped_norm, steps[1].grad_clip_norm) << "step 2 must exercise clipping";
  Json ref = Reference("adamw", in);
  for (const auto& [name, t] : s.model().LoraWeights()) {
    torch::Tensor r = FromJson(ref["params"][name]).reshape(t.sizes());
    EXPECT_LE(RelErr(t, r), 1e-6) << name;
    EXPECT_GT(RelErr(t, FromJson(in["params"][name]["data"]).reshape(t.sizes())), 1e-3)
        << name << " did not move";
  }
}

TEST_F(LoopRunTest, SavedStateReproducesTheNextStepExactly) {
  const auto config = ParseLossConfig("ppo", Json(), "c");
  LoopRun a(base_, lora_);
  LoopAdamParams p;
  p.learning_rate = 1e-2;
  for (uint64_t k = 0; k < 2; ++k) {
    a.Forward({Datum(8, 40 + k, true)}, "ppo", config, true);
    a.OptimStep(p);
  }
  NamedTensors state = a.State();
  TensorMap map;
  for (auto& [name, t] : state) map[name] = t.clone();
  LoopLoraOptions other = lora_;
  other.seed = 99;  // a different initial adapter: everything must come from the state
  LoopRun b(base_, other);
  b.LoadState(map, /*with_optimizer=*/true);
  EXPECT_EQ(b.steps(), 2);
  for (LoopRun* s : {&a, &b}) {
    s->Forward({Datum(11, 50, true)}, "ppo", config, true);
    s->OptimStep(p);
  }
  auto wa = a.model().LoraWeights(), wb = b.model().LoraWeights();
  ASSERT_EQ(wa.size(), wb.size());
  for (size_t i = 0; i < wa.size(); ++i) EXPECT_TRUE(torch::equal(wa[i].second, wb[i].second)) << wa[i].first;
  // Without the optimizer: the weights, fresh moments.
  LoopRun c(base_, other);
  c.LoadState(map, /*with_optimizer=*/false);
  EXPECT_EQ(c.steps(), 0);
  // A state of another shape is refused and changes nothing.
  LoopLoraOptions wide = lora_;
  wide.rank = 8;
  LoopRun d(base_, wide);
  auto before = d.model().LoraWeights()[0].second.clone();
  test_util::ExpectBurstError([&] { d.LoadState(map, true); }, Code::kInvalidArgument, {"misshapes"});
  EXPECT_TRUE(torch::equal(before, d.model().LoraWeights()[0].second));
}

TEST_F(LoopRunTest, SamplerLogprobsEqualTheTrainersForwardLogprobs) {
  auto tok = LoadTokenizer(testing::FixtureTokenizerDir());
  LlamaModel base = LlamaModel::Random(PresetConfig("tiny", tok->vocab_size()), 3, 0.1);
  LoopRun s(base, lora_);
  {
    torch::NoGradGuard g;
    for (auto& [name, slot] : s.mutable_model().LoraWeightSlots())
      if (name.find("lora_B") != std::string::npos) test_util::FillNormal(*slot, 8, 0.0, 0.05);
  }
  std::vector<int> prompt = {5, 17, 42, 9};
  SampleParams sp;
  sp.max_tokens = 12;
  sp.seed = 3;
  sp.temperature = 1.0;
  SampleOutput out = Sample(s.model(), *tok, prompt, sp)[0];
  ASSERT_FALSE(out.token_ids.empty());
  LoopDatum d;
  std::vector<int> seq = prompt;
  seq.insert(seq.end(), out.token_ids.begin(), out.token_ids.end());
  for (size_t i = 0; i + 1 < seq.size(); ++i) {
    d.tokens.push_back(seq[i]);
    d.targets.push_back(seq[i + 1]);
  }
  d.inputs["weights"] = std::vector<float>(d.tokens.size(), 1.0f);
  LoopForwardResult f = s.Forward({d}, "cross_entropy", ParseLossConfig("cross_entropy", Json(), "c"), false);
  const auto& lp = f.outputs[0].at("logprobs");
  for (size_t k = 0; k < out.token_ids.size(); ++k) {
    EXPECT_NEAR(lp[prompt.size() - 1 + k], out.logprobs[k], 1e-5) << "token " << k;
  }
}

}  // namespace
}  // namespace burst
