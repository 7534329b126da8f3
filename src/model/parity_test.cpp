// Parity of Burst's Llama forward, loss and gradients with an independent
// PyTorch reference of Hugging Face's LlamaForCausalLM + PEFT LoRA
// (tests/reference/llama_ref.py, run with Debian's /usr/bin/python3, or the
// interpreter BURST_REFERENCE_PYTHON names: the GPU check's PyTorch 2.x).
//
// For each random tiny config the test saves the model (and a LoRA adapter
// with random nonzero A and B) as a Hugging Face / PEFT folder, computes in
// C++ the logits, the weighted next-token loss (via Hidden() and
// SelectedLogProbs(), as training does) and its gradients by autograd, runs
// the reference on the same folder and inputs, and compares every tensor:
// max|ours - ref| / max(max|ref|, 1e-6) <= 1e-5. The reference computes in
// float64 (--float64), so the bound measures Burst's float32 error against
// the exact values, not agreement of two float32 implementations.
//
// Skipped (not failed) when that interpreter cannot import torch.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <iomanip>
#include <set>
#include <sstream>

#include "core/fs.h"
#include "core/json.h"
#include "model/hf_io.h"
#include "model/llama.h"
#include "model/safetensors.h"
#include "model/test_util.h"

namespace burst {
namespace {

using test_util::RelErr;
using test_util::TempDir;

constexpr double kTol = 1e-5;
constexpr int64_t kBatch = 2, kSeq = 12;

// The reference's interpreter (a path or a command name; not quoted).
std::string ReferencePython() {
  const char* env = std::getenv("BURST_REFERENCE_PYTHON");
  return env && *env ? env : "/usr/bin/python3";
}

bool PythonHasTorch() {
  static const bool ok =
      std::system((ReferencePython() + " -c 'import torch' >/dev/null 2>&1").c_str()) == 0;
  return ok;
}

std::string Quote(const std::string& s) {
  std::string out = "'";
  for (char c : s) {
    if (c == '\'') out += "'\\''";
    else out.push_back(c);
  }
  return out + "'";
}

struct Case {
  std::string name;
  LlamaConfig config;
  bool lora = false;        // adapter on all 7 targets, grads of A and B
  bool base_grads = false;  // full fine-tuning grads of every base weight
  uint64_t seed = 1;
  bool head_lora = false;  // the adapter covers lm_head too (Tinker's train_unembed)
};

LlamaConfig MakeConfig(int64_t vocab, int64_t hidden, int64_t layers, int64_t heads, int64_t kv,
                       int64_t head_dim, int64_t ffn, bool tied, double theta, double eps) {
  LlamaConfig c;
  c.vocab_size = vocab;
  c.hidden_size = hidden;
  c.num_hidden_layers = layers;
  c.num_attention_heads = heads;
  c.num_key_value_heads = kv;
  c.head_dim = head_dim;
  c.intermediate_size = ffn;
  c.tie_word_embeddings = tied;
  c.rope_theta = theta;
  c.rms_norm_eps = eps;
  c.max_position_embeddings = 256;
  c.raw = {{"model_type", "llama"}};
  return c;
}

std::vector<Case> Cases() {
  std::vector<Case> cases;
  // GQA 4/2 heads, head_dim 16, untied, Llama 3 style rope_theta and eps.
  cases.push_back({"gqa_untied_lora", MakeConfig(131, 64, 2, 4, 2, 16, 96, false, 500000.0, 1e-5),
                   true, false, 11});
  // MHA, tied embeddings, the LM head adapted too.
  cases.push_back({"mha_tied_lora_head", MakeConfig(113, 64, 2, 4, 4, 16, 80, true, 10000.0, 1e-6),
                   true, false, 12, true});
  // Full fine-tuning gradients of every base weight, tied (the head's
  // gradient lands in embed_tokens) and untied.
  cases.push_back({"gqa_tied_full", MakeConfig(131, 64, 2, 4, 2, 16, 96, true, 500000.0, 1e-5),
                   false, true, 13});
  cases.push_back({"mha_untied_full", MakeConfig(97, 32, 2, 2, 2, 16, 64, false, 10000.0, 1e-6),
                   false, true, 14});
  // head_dim * heads != hidden, 4 query heads on one kv head, attention bias,
  // llama3 rope scaling (short original context so all three bands occur).
  LlamaConfig odd = MakeConfig(101, 48, 3, 4, 1, 16, 72, false, 500000.0, 1e-5);
  odd.attention_bias = true;
  odd.rope_scaling = {{"rope_type", "llama3"},
                      {"factor", 8.0},
                      {"low_freq_factor", 1.0},
                      {"high_freq_factor", 4.0},
                      {"original_max_position_embeddings", 8}};
  cases.push_back({"gqa41_bias_llama3_lora", odd, true, false, 15});
  return cases;
}

struct Worst {
  double err = 0.0;
  std::string what;
  void Add(double e, const std::string& name) {
    if (e > err || what.empty()) {
      err = e;
      what = name;
    }
  }
};

class ParityTest : public ::testing::TestWithParam<Case> {};

TEST_P(ParityTest, MatchesReference) {
  if (!PythonHasTorch()) {
    GTEST_SKIP() << ReferencePython() << " cannot `import torch` (Debian's python3-torch; or set "
                    "BURST_REFERENCE_PYTHON); the reference tests/reference/llama_ref.py cannot run";
  }
  torch::set_num_threads(1);
  const Case& tc = GetParam();
  const LlamaConfig& cfg = tc.config;
  TempDir dir("burst_parity_");
  const fs::path model_dir = dir / "model", adapter_dir = dir / "adapter";

  // ---- a random model with non-trivial norms (and biases), saved as HF
  LlamaModel model = LlamaModel::Random(cfg, tc.seed, /*init_std=*/0.15);
  test_util::RandomizeNorms(model, tc.seed + 1000);
  SaveModel(model, model_dir);
  if (tc.lora) {
    LoraSpec spec;
    spec.rank = 4;
    spec.alpha = 8.0;
    if (tc.head_lora) spec.targets.push_back("lm_head");
    model.AddLora(spec, tc.seed + 2000);
    test_util::RandomizeLora(model, tc.seed + 3000, /*b_std=*/0.1);
    for (const auto& [name, t] : model.LoraWeights())
      ASSERT_GT(test_util::MaxAbs(t), 0.0) << name << " must be nonzero";
    SaveAdapter(model, adapter_dir, model_dir.string());
  }

  // ---- inputs: ids (B, T), 0/1 weights (B, T-1) with a 1 in every row
  torch::Tensor ids = test_util::RandomIds(kBatch, kSeq, cfg.vocab_size, tc.seed + 4000);
  auto gen = at::make_generator<at::CPUGeneratorImpl>(tc.seed + 5000);
  torch::Tensor w = torch::randint(2, {kBatch, kSeq - 1}, gen).to(torch::kFloat32);
  for (int64_t b = 0; b < kBatch; ++b) w.index_put_({b, (3 * b + 1) % (kSeq - 1)}, 1.0);
  ASSERT_LT(w.sum().item<double>(), kBatch * (kSeq - 1)) << "some weights should be 0";

  Json in = Json::object();
  in["input_ids"] = Json::array();
  in["loss_weights"] = Json::array();
  for (int64_t b = 0; b < kBatch; ++b) {
    Json row = Json::array(), wrow = Json::array();
    for (int64_t t = 0; t < kSeq; ++t) row.push_back(ids[b][t].item<int64_t>());
    for (int64_t t = 0; t < kSeq - 1; ++t) wrow.push_back(w[b][t].item<double>());
    in["input_ids"].push_back(row);
    in["loss_weights"].push_back(wrow);
  }
  WriteFileAtomic(dir / "in.json", in.dump());

  // ---- the reference
  const fs::path out_path = dir / "ref.safetensors", err_path = dir / "ref.stderr";
  std::string cmd = ReferencePython() + " " +
                    Quote(std::string(BURST_SOURCE_DIR) + "/tests/reference/llama_ref.py") +
                    " --model " + Quote(model_dir.string()) +
                    (tc.lora ? " --adapter " + Quote(adapter_dir.string()) : std::string()) +
                    " --input " + Quote((dir / "in.json").string()) + " --out " +
                    Quote(out_path.string()) + " --threads 1 --float64" +
                    (tc.base_grads ? " --base-grads" : "") + " >/dev/null 2>" +
                    Quote(err_path.string());
  int rc = std::system(cmd.c_str());
  ASSERT_EQ(rc, 0) << "reference failed: " << cmd << "\n"
                   << (fs::exists(err_path) ? ReadFile(err_path) : std::string());
  TensorMap ref = ReadSafetensors(out_path);
  ASSERT_TRUE(ref.count("logits"));
  ASSERT_TRUE(ref.count("loss"));
  ASSERT_TRUE(ref.count("token_ce"));

  Worst worst;
  std::ostringstream report;
  report << std::scientific << std::setprecision(2);
  auto check = [&](const std::string& name, const torch::Tensor& ours, const torch::Tensor& theirs) {
    ASSERT_EQ(ours.sizes().vec(), theirs.sizes().vec()) << name;
    double e = RelErr(ours, theirs);
    worst.Add(e, name);
    EXPECT_LE(e, kTol) << tc.name << ": " << name << " differs from the reference, rel err " << e
                       << " (max|ref| " << test_util::MaxAbs(theirs) << ")";
  };

  // ---- logits
  {
    torch::NoGradGuard no_grad;
    torch::Tensor logits = model.Forward(ids);  // (B, T, V)
    check("logits", logits, ref.at("logits"));
    report << " logits " << RelErr(logits, ref.at("logits"));
  }

  // ---- loss and gradients, the way training computes them
  model.SetTrainable(/*full=*/tc.base_grads);
  torch::Tensor hidden = model.Hidden(ids).narrow(1, 0, kSeq - 1);  // (B, T-1, C)
  torch::Tensor targets = ids.narrow(1, 1, kSeq - 1);               // (B, T-1)
  TargetLogProbs sel = SelectedLogProbs(model, hidden, targets, w);
  torch::Tensor loss = -(sel.logp * sel.weights).sum() / w.sum();
  check("loss", loss.reshape({1}), ref.at("loss"));
  report << " loss " << RelErr(loss.reshape({1}), ref.at("loss"));
  check("token_ce", -sel.logp.detach(), ref.at("token_ce").reshape({-1}).index_select(0, sel.rows));
  loss.backward();

  NamedTensors params = tc.base_grads ? model.BaseWeights() : model.LoraWeights();
  ASSERT_FALSE(params.empty());
  std::set<std::string> ours_names, ref_names;
  for (const auto& [name, t] : params) ours_names.insert("grad." + name);
  for (const auto& [name, t] : ref)
    if (name.rfind("grad.", 0) == 0) ref_names.insert(name);
  EXPECT_EQ(ours_names, ref_names) << "gradient sets differ";
  Worst worst_grad;
  for (const auto& [name, t] : params) {
    const std::string key = "grad." + name;
    if (!ref.count(key)) continue;
    ASSERT_TRUE(t.grad().defined()) << name << " got no gradient";
    EXPECT_GT(test_util::MaxAbs(ref.at(key)), 0.0) << key << " is zero in the reference";
    check(key, t.grad(), ref.at(key));
    worst_grad.Add(RelErr(t.grad(), ref.at(key)), name);
  }
  if (tc.base_grads) {
    for (const auto& [name, t] : model.LoraWeights()) EXPECT_FALSE(t.grad().defined()) << name;
  } else {
    for (const auto& [name, t] : model.BaseWeights()) EXPECT_FALSE(t.grad().defined()) << name;
  }
  report << " grads(" << params.size() << ") worst " << worst_grad.err << " [" << worst_grad.what
         << "]";
  std::printf("[parity] %-24s%s\n", tc.name.c_str(), report.str().c_str());
  std::printf("[parity] %-24s worst overall %.2e (%s)\n", tc.name.c_str(), worst.err,
              worst.what.c_str());
  RecordProperty("worst_rel_err", std::to_string(worst.err));
  RecordProperty("worst_tensor", worst.what);
}

INSTANTIATE_TEST_SUITE_P(Configs, ParityTest, ::testing::ValuesIn(Cases()),
                         [](const ::testing::TestParamInfo<Case>& info) {
                           return info.param.name;
                         });

}  // namespace
}  // namespace burst
