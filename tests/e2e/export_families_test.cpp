// `burst export --gguf` of the families beyond Llama (Qwen 2 and 3, Qwen 3
// MoE, Mixtral, Gemma 3: llama.cpp's qwen2, qwen3, qwen3moe, llama with
// experts and gemma3 architectures): models that transformers writes
// (tests/reference/hf_ref.py make, the shipped model's tokenizer beside
// them) read back tensor by tensor by both GGUF readers, and decoded
// greedily in llama.cpp itself to the tokens Burst decodes; what llama.cpp
// would compute otherwise is refused naming the field.
#include <gtest/gtest.h>

#include "e2e_gguf.h"

namespace burst::e2e {
namespace {

// A tiny random model of `type` as transformers writes it, in `dir`.
ProcResult MakeModel(const fs::path& dir, const Json& config) {
  WriteJsonFile(dir.parent_path() / (dir.filename().string() + ".json"), config);
  Process make({BURST_PYTHON, (SourceDir() / "tests/reference/hf_ref.py").string(), "make", "--config",
                (dir.parent_path() / (dir.filename().string() + ".json")).string(), "--out", dir.string(),
                "--seed", "5"});
  ProcResult r = make.Wait(300);
  if (r.ok()) {
    for (const char* f : {"tokenizer.model", "tokenizer_config.json", "generation_config.json"})
      fs::copy_file(SourceDir() / "models/burst-small" / f, dir / f, fs::copy_options::overwrite_existing);
  }
  return r;
}

// A tiny model of every family: 2 layers, 64 wide, 4 heads sharing 2 kv heads.
Json BaseConfig() {
  return {{"vocab_size", 4096},
          {"hidden_size", 64},
          {"intermediate_size", 96},
          {"num_hidden_layers", 2},
          {"num_attention_heads", 4},
          {"num_key_value_heads", 2},
          {"max_position_embeddings", 512},
          {"rms_norm_eps", 1e-6},
          {"rope_theta", 1000000.0}};
}

// The model of `config` made by transformers, exported (f32), read back by
// both readers with every tensor the model's; returns the check. `*out` is
// the file.
Json ExportAndCheck(const fs::path& dir, const Json& config, fs::path* out) {
  const std::string type = config["model_type"];
  const fs::path model = dir / type;
  const ProcResult made = MakeModel(model, config);
  EXPECT_TRUE(made.ok()) << made.Describe();
  *out = dir / (type + ".gguf");
  const ProcResult r = RunBurst(
      {"export", "--model", model.string(), "--gguf", "f32", "--out", out->string(), "--threads", "1"});
  EXPECT_TRUE(r.ok()) << r.Describe();
  if (!made.ok() || !r.ok()) return Json::object();
  const Json c = Check(*out, model);
  EXPECT_TRUE(Differing(c).empty()) << "tensors that are not the model's: " << Json(Differing(c)).dump();
  return c;
}

// How many of the file's tensors have `part` in their name.
size_t Tensors(const Json& check, const std::string& part) {
  size_t n = 0;
  for (const Json& t : check.value("tensors", Json::array()))
    n += t["name"].get<std::string>().find(part) != std::string::npos;
  return n;
}

// The exported file decoded greedily by llama.cpp to the tokens Burst decodes.
void ExpectLlamaCppDecodesAsBurst(const fs::path& model, const fs::path& out) {
  const std::vector<std::string> prompts = {"My card was charged twice", "Where is my parcel?"};
  constexpr int kTokens = 8;
  const Json l = LlamaCpp(out, kTokens, prompts);
  ASSERT_EQ(l["runs"].size(), prompts.size());
  for (size_t i = 0; i < prompts.size(); ++i) {
    const Json b = BurstGreedy({"--model", model.string()}, kTokens, prompts[i]);
    EXPECT_EQ(l["runs"][i]["prompt_token_ids"], b["prompt_token_ids"]) << prompts[i];
    EXPECT_EQ(l["runs"][i]["token_ids"], b["samples"][0]["token_ids"]) << prompts[i];
  }
}

TEST(ExportGgufFamilies, QwenModelsReadBackAndLlamaCppDecodesWhatBurstDecodes) {
  if (!HaveReader() || !HaveLlamaCpp()) GTEST_SKIP() << "the npm reference packages are not installed";
  TempDir tmp("burst-e2e-gguf-qwen");
  Json qwen2 = BaseConfig(), qwen3 = BaseConfig();
  qwen2["model_type"] = "qwen2";  // biases on q, k and v
  qwen3["model_type"] = "qwen3";  // q and k norms, head_dim * heads != hidden, tied
  qwen3["head_dim"] = 24;
  qwen3["tie_word_embeddings"] = true;
  for (const Json& config : {qwen2, qwen3}) {
    const std::string type = config["model_type"];
    SCOPED_TRACE(type);
    fs::path out;
    const Json c = ExportAndCheck(tmp.path(), config, &out);
    ASSERT_FALSE(c.empty());
    const Json& m = c["metadata"];
    EXPECT_EQ(m["general.architecture"], type);
    EXPECT_EQ(m[type + ".block_count"], 2);
    EXPECT_EQ(m[type + ".attention.head_count_kv"], 2);
    EXPECT_EQ(Tensors(c, ".bias"), type == "qwen2" ? 6u : 0u) << "q, k and v biases in both layers";
    EXPECT_EQ(Tensors(c, "attn_q_norm") + Tensors(c, "attn_k_norm"), type == "qwen3" ? 4u : 0u)
        << "q and k norms in both layers";
    ExpectLlamaCppDecodesAsBurst(tmp.path() / type, out);
  }
}

TEST(ExportGgufFamilies, MixturesOfExpertsAndGemmaThree) {
  if (!HaveReader() || !HaveLlamaCpp()) GTEST_SKIP() << "the npm reference packages are not installed";
  TempDir tmp("burst-e2e-gguf-moe");
  Json qwen3_moe = BaseConfig(), mixtral = BaseConfig(), gemma = BaseConfig();
  qwen3_moe.update({{"model_type", "qwen3_moe"},
                    {"moe_intermediate_size", 48},
                    {"num_experts", 4},
                    {"num_experts_per_tok", 2},
                    {"norm_topk_prob", true},
                    {"head_dim", 16},
                    {"tie_word_embeddings", false}});
  mixtral.update({{"model_type", "mixtral"}, {"num_local_experts", 4}, {"num_experts_per_tok", 2}});
  // Seven layers: llama.cpp's pattern (each sixth global) with one of each after it.
  gemma.update({{"model_type", "gemma3_text"},
                {"num_hidden_layers", 7},
                {"head_dim", 16},
                {"query_pre_attn_scalar", 16},
                {"sliding_window", 64},
                {"rope_local_base_freq", 10000.0}});
  for (const auto& [config, arch, experts] :
       {std::tuple{qwen3_moe, "qwen3moe", 4}, std::tuple{mixtral, "llama", 4},
        std::tuple{gemma, "gemma3", 0}}) {
    const std::string type = config["model_type"];
    SCOPED_TRACE(type);
    fs::path out;
    const Json c = ExportAndCheck(tmp.path(), config, &out);
    ASSERT_FALSE(c.empty());
    const Json& m = c["metadata"];
    EXPECT_EQ(m["general.architecture"], arch);
    if (experts > 0) {
      EXPECT_EQ(m[std::string(arch) + ".expert_count"], experts);
      EXPECT_EQ(m[std::string(arch) + ".expert_used_count"], 2);
    } else {
      EXPECT_EQ(m["gemma3.attention.sliding_window"], 64);
      EXPECT_EQ(Tensors(c, "post_ffw_norm"), 7u) << "Gemma's post-MLP norm in every layer";
    }
    EXPECT_EQ(Tensors(c, "_exps."), experts > 0 ? 6u : 0u) << "gate, up and down stacked in both layers";
    ExpectLlamaCppDecodesAsBurst(tmp.path() / type, out);
  }

  // What llama.cpp's architecture would compute otherwise: refused by field.
  Json dense_layer = qwen3_moe, other_pattern = gemma, unnormalised = qwen3_moe, other_scale = gemma;
  dense_layer["mlp_only_layers"] = Json::array({1});
  unnormalised["norm_topk_prob"] = false;
  other_scale["query_pre_attn_scalar"] = 64;
  other_pattern["layer_types"] =
      Json::array({"sliding_attention", "full_attention", "sliding_attention", "sliding_attention",
                   "sliding_attention", "full_attention", "sliding_attention"});
  for (const auto& [config, field] :
       {std::pair{dense_layer, "mlp_only_layers"}, std::pair{other_pattern, "layer_types"},
        std::pair{unnormalised, "norm_topk_prob"}, std::pair{other_scale, "query_pre_attn_scalar"}}) {
    const fs::path model = tmp.path() / ("refused-" + std::string(field));
    const ProcResult made = MakeModel(model, config);
    ASSERT_TRUE(made.ok()) << made.Describe();
    ProcResult r = RunBurst({"export", "--model", model.string(), "--gguf", "f32", "--out",
                             (tmp.path() / "refused.gguf").string(), "--threads", "1"});
    EXPECT_FALSE(r.ok()) << field;
    EXPECT_NE(r.err.find(field), std::string::npos) << r.Describe();
    EXPECT_FALSE(fs::exists(tmp.path() / "refused.gguf"));
  }
}

}  // namespace
}  // namespace burst::e2e
