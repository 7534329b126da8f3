// Parity of Burst's forward, loss and gradients (Llama, Mistral, Qwen 2 and
// 3, Qwen 3 MoE and Mixtral, whose routers must pick the same experts) with
// Hugging Face
// transformers + PEFT, the libraries users check Burst by
// (tests/reference/hf_ref.py, run with the project's .venv, or the
// interpreter BURST_REFERENCE_PYTHON names: the GPU machine's PyTorch).
//
// Both ways round: Burst writes a random model and adapter (SaveModel,
// SaveAdapter) that transformers' from_pretrained and PEFT's
// PeftModel.from_pretrained load; and transformers writes models of its own
// (from_config + save_pretrained: bfloat16, sharded, tied, GQA, llama3 rope
// scaling, its own config.json) with adapters PEFT writes, which Burst loads
// with its real loaders. Each compares logits, the weighted next-token loss
// (via Hidden() and SelectedLogProbs(), as training does) and its gradients
// (the adapter's, or every base weight's) computed by both in float32:
// max|ours - theirs| / max(max|theirs|, 1e-6) <= 1e-5.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <iomanip>
#include <set>
#include <sstream>

#include "core/fs.h"
#include "core/json.h"
#include "model/hf_io.h"
#include "model/judge_process.h"
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
  return env && *env ? env : BURST_PYTHON;
}

bool PythonHasTorch() {
  static const bool ok = std::system((ReferencePython() + " -c 'import torch' >/dev/null 2>&1").c_str()) == 0;
  return ok;
}

std::string Quote(const std::string& s) {
  std::string out = "'";
  for (char c : s) {
    if (c == '\'')
      out += "'\\''";
    else
      out.push_back(c);
  }
  return out + "'";
}

// The judge, started once for the whole binary: `hf_ref.py serve`.
test_util::JudgeProcess& Reference() {
  static test_util::JudgeProcess judge(ReferencePython() + " " +
                                       Quote(std::string(BURST_SOURCE_DIR) + "/tests/reference/hf_ref.py") +
                                       " serve");
  return judge;
}

// LoRA on the attention only.
const std::vector<std::string> kAttention = {"q_proj", "k_proj", "v_proj", "o_proj"};

struct Case {
  std::string name;
  LlamaConfig config;
  bool lora = false;        // adapter on all 7 targets, grads of A and B
  bool base_grads = false;  // full fine-tuning grads of every base weight
  uint64_t seed = 1;
  bool head_lora = false;  // the adapter covers lm_head too (Tinker's train_unembed)
  std::vector<std::string> targets = LoraSpec{}.targets;
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
  cases.push_back(
      {"gqa_untied_lora", MakeConfig(131, 64, 2, 4, 2, 16, 96, false, 500000.0, 1e-5), true, false, 11});
  // MHA, tied embeddings, the LM head adapted too.
  cases.push_back({"mha_tied_lora_head", MakeConfig(113, 64, 2, 4, 4, 16, 80, true, 10000.0, 1e-6), true,
                   false, 12, true});
  // Full fine-tuning gradients of every base weight, tied (the head's
  // gradient lands in embed_tokens) and untied.
  cases.push_back(
      {"gqa_tied_full", MakeConfig(131, 64, 2, 4, 2, 16, 96, true, 500000.0, 1e-5), false, true, 13});
  cases.push_back(
      {"mha_untied_full", MakeConfig(97, 32, 2, 2, 2, 16, 64, false, 10000.0, 1e-6), false, true, 14});
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
  // Qwen 2: biases on q, k and v only.
  LlamaConfig qwen2 = MakeConfig(103, 64, 2, 4, 2, 16, 96, false, 1000000.0, 1e-6);
  qwen2.model_type = "qwen2";
  qwen2.qkv_bias = true;
  qwen2.rope_scaling = {{"rope_type", "yarn"}, {"factor", 4.0}, {"original_max_position_embeddings", 64}};
  cases.push_back({"qwen2_yarn_lora", qwen2, true, false, 16});
  // Qwen 3: RMSNorm on each head of q and k, head_dim * heads != hidden, tied.
  LlamaConfig qwen3 = MakeConfig(109, 48, 2, 4, 2, 16, 80, true, 1000000.0, 1e-6);
  qwen3.model_type = "qwen3";
  qwen3.qk_norm = true;
  cases.push_back({"qwen3_lora_head", qwen3, true, false, 17, true});
  cases.push_back({"qwen3_full", qwen3, false, true, 18});
  // Qwen 3 MoE: 4 experts, 2 a token, renormalised; layer 1 dense.
  LlamaConfig moe = MakeConfig(107, 48, 2, 4, 2, 16, 80, false, 1000000.0, 1e-6);
  moe.model_type = "qwen3_moe";
  moe.qk_norm = true;
  moe.num_experts = 4;
  moe.num_experts_per_tok = 2;
  moe.moe_intermediate_size = 24;
  moe.norm_topk_prob = true;
  moe.mlp_only_layers = {1};
  cases.push_back({"qwen3_moe_full", moe, false, true, 19});
  cases.push_back({"qwen3_moe_lora", moe, true, false, 20});  // the experts adapted as PEFT adapts them
  cases.push_back({"qwen3_moe_attention_lora", moe, true, false, 21, false, kAttention});
  LlamaConfig mixtral = MakeConfig(97, 48, 2, 4, 2, 16, 40, false, 1000000.0, 1e-5);
  mixtral.model_type = "mixtral";
  mixtral.num_experts = 3;
  mixtral.num_experts_per_tok = 2;
  mixtral.moe_intermediate_size = 40;
  mixtral.norm_topk_prob = true;
  cases.push_back({"mixtral_lora", mixtral, true, false, 22});
  // Gemma 3: (1 + w) norms, four a layer, embedding and attention scales,
  // a sliding layer with its own rope base beside a global one, GELU.
  LlamaConfig gemma = MakeConfig(89, 64, 2, 4, 2, 16, 96, true, 1000000.0, 1e-6);
  gemma.model_type = "gemma3_text";
  gemma.gemma = true;
  gemma.qk_norm = true;
  gemma.query_pre_attn_scalar = 24;
  gemma.local_rope_theta = 10000.0;
  gemma.sliding_layers = {true, false};
  gemma.attention_window = 64;
  cases.push_back({"gemma3_lora", gemma, true, false, 23});
  cases.push_back({"gemma3_full", gemma, false, true, 24});
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

// Asks the judge (tests/reference/hf_ref.py run: transformers'
// from_pretrained, PEFT's PeftModel.from_pretrained) on the folders and
// `in`, returns what it wrote: logits, loss, token_ce, grad.<name>.
TensorMap Judge(const fs::path& dir, const fs::path& model_dir, const fs::path* adapter_dir, bool base_grads,
                const Json& in) {
  WriteFileAtomic(dir / "in.json", in.dump());
  const fs::path out_path = dir / "ref.safetensors";
  std::vector<std::string> args = {
      "run",   "--model",         model_dir.string(), "--input", (dir / "in.json").string(),
      "--out", out_path.string(), "--threads",        "1"};
  if (adapter_dir != nullptr) args.insert(args.end(), {"--adapter", adapter_dir->string()});
  if (base_grads) args.push_back("--base-grads");
  const std::string err = Reference().Call(args);
  EXPECT_EQ(err, "") << "the judge failed: " << Json(args).dump();
  if (!err.empty()) return {};
  return ReadSafetensors(out_path);
}

// Burst's logits, weighted loss and gradients (of the adapter, or with
// base_grads of every base weight) against the judge's on the same folders,
// each within kTol.
void CompareWithJudge(LlamaModel& model, const fs::path& dir, const fs::path& model_dir,
                      const fs::path* adapter_dir, bool base_grads, uint64_t seed, const std::string& name) {
  const LlamaConfig& cfg = model.config;
  // ---- inputs: ids (B, T), 0/1 weights (B, T-1) with a 1 in every row
  torch::Tensor ids = test_util::RandomIds(kBatch, kSeq, cfg.vocab_size, seed + 4000);
  auto gen = at::make_generator<at::CPUGeneratorImpl>(seed + 5000);
  torch::Tensor w = torch::randint(2, {kBatch, kSeq - 1}, gen).to(torch::kFloat32);
  for (int64_t b = 0; b < kBatch; ++b) w.index_put_({b, (3 * b + 1) % (kSeq - 1)}, 1.0);
  ASSERT_LT(w.sum().item<double>(), kBatch * (kSeq - 1)) << "some weights should be 0";
  Json in = {{"input_ids", Json::array()}, {"loss_weights", Json::array()}};
  for (int64_t b = 0; b < kBatch; ++b) {
    Json row = Json::array(), wrow = Json::array();
    for (int64_t t = 0; t < kSeq; ++t) row.push_back(ids[b][t].item<int64_t>());
    for (int64_t t = 0; t < kSeq - 1; ++t) wrow.push_back(w[b][t].item<double>());
    in["input_ids"].push_back(row);
    in["loss_weights"].push_back(wrow);
  }
  TensorMap ref = Judge(dir, model_dir, adapter_dir, base_grads, in);
  ASSERT_TRUE(ref.count("logits") && ref.count("loss") && ref.count("token_ce"));

  Worst worst;
  std::ostringstream report;
  report << std::scientific << std::setprecision(2);
  auto check = [&](const std::string& what, const torch::Tensor& ours, const torch::Tensor& theirs) {
    ASSERT_EQ(ours.sizes().vec(), theirs.sizes().vec()) << what;
    double e = RelErr(ours, theirs);
    worst.Add(e, what);
    EXPECT_LE(e, kTol) << name << ": " << what << " differs from transformers', rel err " << e
                       << " (max|ref| " << test_util::MaxAbs(theirs) << ")";
  };
  {
    torch::NoGradGuard no_grad;
    std::vector<torch::Tensor> routes;  // a mixture of experts' picks, per MoE layer
    ForwardOptions fo;
    fo.expert_choices = &routes;
    torch::Tensor logits = model.Forward(ids, nullptr, fo);  // (B, T, V)
    check("logits", logits, ref.at("logits"));
    report << " logits " << RelErr(logits, ref.at("logits"));
    size_t ref_routes = 0;
    while (ref.count("route." + std::to_string(ref_routes))) ++ref_routes;
    EXPECT_EQ(routes.size(), ref_routes) << "mixture-of-experts layers";
    for (size_t i = 0; i < std::min(routes.size(), ref_routes); ++i) {
      const torch::Tensor& theirs = ref.at("route." + std::to_string(i));
      EXPECT_TRUE(torch::equal(routes[i], theirs.view_as(routes[i])))
          << name << ": the experts layer " << i << "'s router picks differ from transformers'";
    }
    if (!routes.empty()) report << " routes(" << routes.size() << ") identical";
  }
  // ---- loss and gradients, the way training computes them
  model.SetTrainable(/*full=*/base_grads);
  torch::Tensor hidden = model.Hidden(ids).narrow(1, 0, kSeq - 1);  // (B, T-1, C)
  torch::Tensor targets = ids.narrow(1, 1, kSeq - 1);               // (B, T-1)
  TargetLogProbs sel = SelectedLogProbs(model, hidden, targets, w);
  torch::Tensor loss = -(sel.logp * sel.weights).sum() / w.sum();
  check("loss", loss.reshape({1}), ref.at("loss"));
  report << " loss " << RelErr(loss.reshape({1}), ref.at("loss"));
  check("token_ce", -sel.logp.detach(), ref.at("token_ce").reshape({-1}).index_select(0, sel.rows));
  loss.backward();

  NamedTensors params = base_grads ? model.BaseWeights() : model.LoraWeights();
  ASSERT_FALSE(params.empty());
  std::set<std::string> ours_names, ref_names;
  for (const auto& [n, t] : params) ours_names.insert("grad." + n);
  for (const auto& [n, t] : ref)
    if (n.rfind("grad.", 0) == 0) ref_names.insert(n);
  EXPECT_EQ(ours_names, ref_names) << "gradient sets differ";
  Worst worst_grad;
  for (const auto& [n, t] : params) {
    const std::string key = "grad." + n;
    if (!ref.count(key)) continue;
    // An expert no token was routed to has no gradient (zero in transformers'
    // fused tensor): the routes above are the same, so compare it as zeros.
    const bool expert = n.find(".experts.") != std::string::npos;
    if (!expert) {
      ASSERT_TRUE(t.grad().defined()) << n << " got no gradient";
      EXPECT_GT(test_util::MaxAbs(ref.at(key)), 0.0) << key << " is zero in the reference";
    }
    const torch::Tensor grad = t.grad().defined() ? t.grad() : torch::zeros_like(t);
    check(key, grad, ref.at(key));
    worst_grad.Add(RelErr(grad, ref.at(key)), n);
  }
  if (base_grads) {
    for (const auto& [n, t] : model.LoraWeights()) EXPECT_FALSE(t.grad().defined()) << n;
  } else {
    for (const auto& [n, t] : model.BaseWeights()) EXPECT_FALSE(t.grad().defined()) << n;
  }
  report << " grads(" << params.size() << ") worst " << worst_grad.err << " [" << worst_grad.what << "]";
  std::printf("[parity] %-24s%s\n", name.c_str(), report.str().c_str());
  std::printf("[parity] %-24s worst overall %.2e (%s)\n", name.c_str(), worst.err, worst.what.c_str());
  ::testing::Test::RecordProperty("worst_rel_err", std::to_string(worst.err));
  ::testing::Test::RecordProperty("worst_tensor", worst.what);
}

void RequireJudge() {
  if (!PythonHasTorch()) {
    FAIL() << ReferencePython()
           << " cannot `import torch` (scripts/install-deps.sh makes .venv; or set "
              "BURST_REFERENCE_PYTHON): transformers cannot judge";
  }
}

// Burst writes the model and the adapter; transformers and PEFT load them.
class ParityTest : public ::testing::TestWithParam<Case> {};

TEST_P(ParityTest, MatchesTransformersOnBurstsFiles) {
  ASSERT_NO_FATAL_FAILURE(RequireJudge());
  torch::set_num_threads(1);
  const Case& tc = GetParam();
  TempDir dir("burst_parity_");
  const fs::path model_dir = dir / "model", adapter_dir = dir / "adapter";
  // ---- a random model with non-trivial norms (and biases), saved as HF
  LlamaModel model = LlamaModel::Random(tc.config, tc.seed, /*init_std=*/0.15);
  test_util::RandomizeNorms(model, tc.seed + 1000);
  SaveModel(model, model_dir);
  if (tc.lora) {
    LoraSpec spec;
    spec.rank = 4;
    spec.alpha = 8.0;
    spec.targets = tc.targets;
    if (tc.head_lora) spec.targets.push_back("lm_head");
    model.AddLora(spec, tc.seed + 2000);
    test_util::RandomizeLora(model, tc.seed + 3000, /*b_std=*/0.1);
    for (const auto& [name, t] : model.LoraWeights())
      ASSERT_GT(test_util::MaxAbs(t), 0.0) << name << " must be nonzero";
    SaveAdapter(model, adapter_dir, model_dir.string());
  }
  CompareWithJudge(model, dir.path(), model_dir, tc.lora ? &adapter_dir : nullptr, tc.base_grads, tc.seed,
                   tc.name);
}

// transformers writes the model (from_config + save_pretrained: its own
// config.json, shards and dtypes) and PEFT the adapter (get_peft_model +
// save_pretrained); Burst loads them with its real loaders.
struct HfCase {
  std::string name;
  Json config;  // config.json fields for AutoConfig.for_model
  std::string dtype = "float32";
  std::string max_shard_size = "5GB";
  bool adapter = true;  // else full fine-tuning gradients
  uint64_t seed = 1;
  std::string targets = "q_proj,k_proj,v_proj,o_proj,gate_proj,up_proj,down_proj";
};

std::vector<HfCase> HfCases() {
  const Json base = {
      {"model_type", "llama"},        {"vocab_size", 131},      {"hidden_size", 64},
      {"intermediate_size", 96},      {"num_hidden_layers", 2}, {"num_attention_heads", 4},
      {"num_key_value_heads", 2},     {"rms_norm_eps", 1e-5},   {"max_position_embeddings", 256},
      {"tie_word_embeddings", false}, {"rope_theta", 500000.0}};
  std::vector<HfCase> cases;
  cases.push_back({"gqa_untied_peft", base, "float32", "5GB", true, 21});
  Json tied = base;
  tied["tie_word_embeddings"] = true;
  tied["num_key_value_heads"] = 4;
  cases.push_back({"mha_tied_bf16_sharded_full", tied, "bfloat16", "20KB", false, 22});
  Json odd = base;
  odd["hidden_size"] = 48;
  odd["head_dim"] = 16;
  odd["num_key_value_heads"] = 1;
  odd["attention_bias"] = true;
  odd["rope_scaling"] = {{"rope_type", "llama3"},
                         {"factor", 8.0},
                         {"low_freq_factor", 1.0},
                         {"high_freq_factor", 4.0},
                         {"original_max_position_embeddings", 8}};
  cases.push_back({"gqa41_bias_llama3_peft", odd, "float32", "5GB", true, 23});
  // The other families, as transformers' own config classes write them.
  Json qwen2 = base;
  qwen2["model_type"] = "qwen2";
  cases.push_back({"qwen2_peft", qwen2, "float32", "5GB", true, 24});
  cases.push_back({"qwen2_bf16_sharded_full", qwen2, "bfloat16", "20KB", false, 25});
  Json qwen3 = base;
  qwen3["model_type"] = "qwen3";
  qwen3["head_dim"] = 24;
  qwen3["tie_word_embeddings"] = true;
  qwen3["rope_theta"] = 10000.0;
  qwen3["rope_scaling"] = {{"rope_type", "yarn"}, {"factor", 4.0}, {"original_max_position_embeddings", 64}};
  cases.push_back({"qwen3_yarn_peft", qwen3, "float32", "5GB", true, 26});
  // YaRN's original context defaulting to max_position_embeddings, and a
  // beta band of the config's own.
  qwen3["attention_bias"] = true;
  qwen3["rope_scaling"] = {{"rope_type", "yarn"}, {"factor", 2.0}, {"beta_fast", 16}, {"beta_slow", 2}};
  cases.push_back({"qwen3_bias_yarn_full", qwen3, "float32", "5GB", false, 27});
  Json mistral = base;
  mistral["model_type"] = "mistral";
  mistral["sliding_window"] = 64;  // longer than the test's sequences: full attention within it
  cases.push_back({"mistral_window_peft", mistral, "float32", "5GB", true, 28});
  // Mixtures of experts as transformers writes them (its files keep one
  // tensor per expert): Qwen 3 MoE with a dense layer among the sparse, and
  // Mixtral (its router always renormalises).
  Json moe = base;
  moe["model_type"] = "qwen3_moe";
  moe["num_hidden_layers"] = 3;
  moe["num_experts"] = 5;
  moe["num_experts_per_tok"] = 2;
  moe["moe_intermediate_size"] = 24;
  moe["mlp_only_layers"] = {1};
  cases.push_back({"qwen3_moe_full", moe, "float32", "5GB", false, 29});
  moe["norm_topk_prob"] = true;
  cases.push_back({"qwen3_moe_topk_norm_peft", moe, "float32", "5GB", true, 30});  // PEFT fuses gate and up
  Json mixtral = base;
  mixtral["model_type"] = "mixtral";
  mixtral["num_local_experts"] = 4;
  mixtral["num_experts_per_tok"] = 2;
  mixtral["intermediate_size"] = 32;
  cases.push_back({"mixtral_full", mixtral, "float32", "5GB", false, 31});
  Json gemma = base;  // 3 layers: sliding, global, sliding
  gemma["model_type"] = "gemma3_text";
  gemma["num_hidden_layers"] = 3;
  gemma["head_dim"] = 16;
  gemma["query_pre_attn_scalar"] = 16;
  gemma["sliding_window"] = 64;
  gemma["sliding_window_pattern"] = 2;
  gemma["rope_local_base_freq"] = 10000.0;
  gemma.erase("tie_word_embeddings");  // Gemma ties by default
  cases.push_back({"gemma3_peft", gemma, "float32", "5GB", true, 33});
  gemma["rope_scaling"] = {{"rope_type", "linear"}, {"factor", 4.0}};  // the global layers' only
  cases.push_back({"gemma3_scaled_full", gemma, "float32", "5GB", false, 34});
  cases.push_back({"mixtral_bf16_sharded_peft", mixtral, "bfloat16", "20KB", true, 32,
                   "q_proj,k_proj,v_proj,o_proj,w1,w2,w3"});
  return cases;
}

class HfParityTest : public ::testing::TestWithParam<HfCase> {};

TEST_P(HfParityTest, BurstLoadsTransformersFilesAndMatches) {
  ASSERT_NO_FATAL_FAILURE(RequireJudge());
  torch::set_num_threads(1);
  const HfCase& tc = GetParam();
  TempDir dir("burst_hf_parity_");
  const fs::path model_dir = dir / "model", adapter_dir = dir / "adapter";
  WriteFileAtomic(dir / "config.json", tc.config.dump());
  std::vector<std::string> args = {"make",
                                   "--config",
                                   (dir / "config.json").string(),
                                   "--out",
                                   model_dir.string(),
                                   "--seed",
                                   std::to_string(tc.seed),
                                   "--dtype",
                                   tc.dtype,
                                   "--max-shard-size",
                                   tc.max_shard_size};
  if (tc.adapter) {
    args.insert(args.end(), {"--adapter-out", adapter_dir.string(), "--targets", tc.targets});
  }
  ASSERT_EQ(Reference().Call(args), "") << Json(args).dump();
  if (tc.max_shard_size != "5GB") {
    ASSERT_TRUE(fs::exists(model_dir / "model.safetensors.index.json")) << "not sharded";
  }
  LlamaModel model = LoadModel(model_dir);
  if (tc.adapter) LoadAdapter(model, adapter_dir);
  CompareWithJudge(model, dir.path(), model_dir, tc.adapter ? &adapter_dir : nullptr, !tc.adapter, tc.seed,
                   tc.name);
}

INSTANTIATE_TEST_SUITE_P(Transformers, HfParityTest, ::testing::ValuesIn(HfCases()),
                         [](const ::testing::TestParamInfo<HfCase>& info) { return info.param.name; });

INSTANTIATE_TEST_SUITE_P(Configs, ParityTest, ::testing::ValuesIn(Cases()),
                         [](const ::testing::TestParamInfo<Case>& info) { return info.param.name; });

}  // namespace
}  // namespace burst
