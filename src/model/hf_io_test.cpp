// Tests of Hugging Face / PEFT folder I/O (hf_io.h): model round trips
// (float32, bf16, shards), mismatches between config.json and weights, and
// LoRA adapters (PEFT names and config, reload, merge, bad shapes).
#include "model/hf_io.h"

#include <gtest/gtest.h>

#include <regex>
#include <set>

#include "core/fs.h"
#include "core/json.h"
#include "model/test_util.h"

namespace burst {
namespace {

using test_util::ExpectBurstError;
using test_util::RandomIds;
using test_util::RelErr;
using test_util::TempDir;
using test_util::TinyConfig;

LlamaModel IoTestModel(bool tied = false, uint64_t seed = 1) {
  torch::set_num_threads(1);
  LlamaModel m = LlamaModel::Random(TinyConfig(279, tied), seed, 0.08);
  test_util::RandomizeNorms(m, seed + 50);
  return m;
}

LoraSpec Spec(int64_t rank = 4, double alpha = 8.0) {
  LoraSpec s;
  s.rank = rank;
  s.alpha = alpha;
  return s;
}

void ExpectSameWeights(const LlamaModel& a, const LlamaModel& b) {
  NamedTensors wa = a.BaseWeights(), wb = b.BaseWeights();
  ASSERT_EQ(wa.size(), wb.size());
  for (size_t i = 0; i < wa.size(); ++i) {
    EXPECT_EQ(wa[i].first, wb[i].first);
    EXPECT_EQ(wb[i].second.scalar_type(), torch::kFloat32) << wb[i].first;
    EXPECT_TRUE(torch::equal(wa[i].second, wb[i].second)) << wa[i].first;
  }
}

void ExpectSameConfig(const LlamaConfig& a, const LlamaConfig& b) {
  EXPECT_EQ(a.vocab_size, b.vocab_size);
  EXPECT_EQ(a.hidden_size, b.hidden_size);
  EXPECT_EQ(a.intermediate_size, b.intermediate_size);
  EXPECT_EQ(a.num_hidden_layers, b.num_hidden_layers);
  EXPECT_EQ(a.num_attention_heads, b.num_attention_heads);
  EXPECT_EQ(a.num_key_value_heads, b.num_key_value_heads);
  EXPECT_EQ(a.head_dim, b.head_dim);
  EXPECT_EQ(a.max_position_embeddings, b.max_position_embeddings);
  EXPECT_EQ(a.rms_norm_eps, b.rms_norm_eps);
  EXPECT_EQ(a.rope_theta, b.rope_theta);
  EXPECT_EQ(a.tie_word_embeddings, b.tie_word_embeddings);
  EXPECT_EQ(a.attention_bias, b.attention_bias);
}

void EditConfig(const fs::path& dir, const std::function<void(Json&)>& edit) {
  fs::path p = dir / "config.json";
  Json j = ParseJson(ReadFile(p), p.string());
  edit(j);
  WriteFileAtomic(p, j.dump(2));
}

// ----------------------------------------------------------------------------
// models

TEST(HfIo, RoundTripFloat32IsBitIdentical) {
  for (bool tied : {false, true}) {
    SCOPED_TRACE(tied);
    TempDir dir;
    LlamaModel m = IoTestModel(tied, 2);
    m.config.rope_theta = 500000.0;
    m.config.bos_token_id = 1;
    m.config.eos_token_ids = {278};
    SaveModel(m, dir.path());
    EXPECT_TRUE(fs::exists(dir / "config.json"));
    EXPECT_TRUE(fs::exists(dir / "model.safetensors"));
    EXPECT_FALSE(fs::exists(dir / "model.safetensors.index.json"));
    TensorMap stored = ReadSafetensors(dir / "model.safetensors");
    EXPECT_EQ(stored.count("lm_head.weight"), tied ? 0u : 1u);
    EXPECT_EQ(stored.size(), m.BaseWeights().size());
    for (const auto& [name, t] : stored) EXPECT_EQ(t.scalar_type(), torch::kFloat32) << name;

    LlamaConfig cfg = LoadConfig(dir.path());
    ExpectSameConfig(m.config, cfg);
    EXPECT_EQ(cfg.bos_token_id, std::optional<int64_t>(1));
    EXPECT_EQ(cfg.eos_token_ids, std::vector<int64_t>{278});
    EXPECT_EQ(cfg.torch_dtype, "float32");

    LlamaModel back = LoadModel(dir.path());
    ExpectSameConfig(m.config, back.config);
    ExpectSameWeights(m, back);
    EXPECT_TRUE(torch::equal(back.lm_head, m.lm_head));
    if (tied) {
      EXPECT_EQ(back.lm_head.data_ptr(), back.embed.data_ptr());
    }
    EXPECT_FALSE(back.lora.has_value());
    torch::NoGradGuard no_grad;
    torch::Tensor ids = RandomIds(2, 8, 279, 3);
    // A loaded model has q/k/v and gate/up fused (one GEMM each), which
    // rounds differently from three: the same forward as m fused alike.
    EXPECT_TRUE(back.layers[0].qkv_proj.defined());
    EXPECT_TRUE(back.layers[0].k_proj.is_alias_of(back.layers[0].qkv_proj));
    LlamaModel fused = m;
    fused.FreezeBaseAs(torch::kFloat32);
    EXPECT_TRUE(torch::equal(back.Forward(ids), fused.Forward(ids)));
    // Unfused again: each weight a tensor of its own, the forward m's.
    back.Unfuse();
    EXPECT_FALSE(back.layers[0].qkv_proj.defined());
    EXPECT_FALSE(back.layers[0].gate_up_proj.defined());
    EXPECT_TRUE(back.layers[0].q_proj.is_contiguous());
    EXPECT_FALSE(back.layers[0].k_proj.is_alias_of(back.layers[0].q_proj));
    ExpectSameWeights(m, back);
    EXPECT_TRUE(torch::equal(back.Forward(ids), m.Forward(ids)));
  }
}

TEST(HfIo, ConfigKeepsUnknownFields) {
  TempDir dir;
  LlamaModel m = IoTestModel();
  SaveModel(m, dir.path());
  EditConfig(dir.path(), [](Json& j) { j["my_custom_field"] = "kept"; });
  LlamaModel back = LoadModel(dir.path());
  TempDir dir2;
  SaveModel(back, dir2.path());
  Json j = ParseJson(ReadFile(dir2 / "config.json"), "config.json");
  EXPECT_EQ(j.value("my_custom_field", ""), "kept");
  EXPECT_EQ(j["architectures"], Json::array({"LlamaForCausalLM"}));
}

TEST(HfIo, HalfPrecisionSaveLoadsRoundedWeights) {
  for (auto dtype : {torch::kBFloat16, torch::kFloat16}) {
    SCOPED_TRACE(c10::toString(dtype));
    TempDir dir;
    LlamaModel m = IoTestModel(false, 4);
    SaveOptions opt;
    opt.dtype = dtype;
    SaveModel(m, dir.path(), opt);
    TensorMap stored = ReadSafetensors(dir / "model.safetensors");
    for (const auto& [name, t] : stored) EXPECT_EQ(t.scalar_type(), dtype) << name;
    EXPECT_EQ(LoadConfig(dir.path()).torch_dtype, dtype == torch::kBFloat16 ? "bfloat16" : "float16");
    LlamaModel back = LoadModel(dir.path());
    NamedTensors wa = m.BaseWeights(), wb = back.BaseWeights();
    ASSERT_EQ(wa.size(), wb.size());
    bool any_rounded = false;
    for (size_t i = 0; i < wa.size(); ++i) {
      torch::Tensor rounded = wa[i].second.to(dtype).to(torch::kFloat32);
      EXPECT_EQ(wb[i].second.scalar_type(), torch::kFloat32);
      EXPECT_TRUE(torch::equal(wb[i].second, rounded)) << wa[i].first;
      any_rounded |= !torch::equal(wb[i].second, wa[i].second);
    }
    EXPECT_TRUE(any_rounded) << "the stored weights should really be rounded";
  }
}

TEST(HfIo, ShardedSaveLoadsIdentically) {
  for (bool tied : {false, true}) {
    SCOPED_TRACE(tied);
    TempDir dir;
    LlamaModel m = IoTestModel(tied, 5);
    SaveOptions opt;
    opt.max_shard_bytes = 60000;  // embed alone is 279*64*4 = 71 KB
    SaveModel(m, dir.path(), opt);
    EXPECT_FALSE(fs::exists(dir / "model.safetensors"));
    ASSERT_TRUE(fs::exists(dir / "model.safetensors.index.json"));
    Json index = ParseJson(ReadFile(dir / "model.safetensors.index.json"), "index");
    ASSERT_TRUE(index["weight_map"].is_object());

    std::set<std::string> shard_files;
    for (const auto& e : fs::directory_iterator(dir.path())) {
      std::string name = e.path().filename().string();
      if (name.ends_with(".safetensors")) shard_files.insert(name);
    }
    ASSERT_GE(shard_files.size(), 2u);
    const size_t n = shard_files.size();
    char want[64];
    for (size_t k = 1; k <= n; ++k) {
      std::snprintf(want, sizeof(want), "model-%05zu-of-%05zu.safetensors", k, n);
      EXPECT_TRUE(shard_files.count(want)) << want;
    }
    // The index lists every weight once, pointing at the shard that holds it.
    std::set<std::string> indexed;
    int64_t total = 0;
    for (auto it = index["weight_map"].begin(); it != index["weight_map"].end(); ++it) {
      indexed.insert(it.key());
      TensorMap shard = ReadSafetensors(dir / it->get<std::string>());
      ASSERT_TRUE(shard.count(it.key())) << it.key() << " not in " << it->get<std::string>();
      total += shard.at(it.key()).numel() * 4;
    }
    std::set<std::string> names;
    for (const auto& [name, t] : m.BaseWeights()) names.insert(name);
    EXPECT_EQ(indexed, names);
    EXPECT_EQ(index["metadata"]["total_size"].get<int64_t>(), total);

    LlamaModel back = LoadModel(dir.path());
    ExpectSameWeights(m, back);
    if (tied) {
      EXPECT_EQ(back.lm_head.data_ptr(), back.embed.data_ptr());
    }
  }
}

// ----------------------------------------------------------------------------
// mismatches

TEST(HfIo, ConfigShapeMismatchNamesTensorAndConfig) {
  TempDir dir;
  LlamaModel m = IoTestModel();
  SaveModel(m, dir.path());
  EditConfig(dir.path(), [](Json& j) { j["hidden_size"] = 32; });
  Status s = ExpectBurstError([&] { LoadModel(dir.path()); }, Code::kInvalidArgument,
                              {"config.json", "model.embed_tokens.weight"});
  EXPECT_EQ(s.param(), "model.embed_tokens.weight");

  // A mismatch deeper in the model (MLP width) names that tensor.
  TempDir dir2;
  SaveModel(m, dir2.path());
  EditConfig(dir2.path(), [](Json& j) { j["intermediate_size"] = 128; });
  s = ExpectBurstError([&] { LoadModel(dir2.path()); }, Code::kInvalidArgument,
                       {"config.json", "model.layers.0.mlp.gate_proj.weight", "[176, 64]", "[128, 64]"});
  EXPECT_EQ(s.param(), "model.layers.0.mlp.gate_proj.weight");
}

TEST(HfIo, MissingWeightIsNamed) {
  TempDir dir;
  LlamaModel m = IoTestModel();
  SaveModel(m, dir.path());
  const fs::path file = dir / "model.safetensors";
  TensorMap stored = ReadSafetensors(file);
  NamedTensors kept;
  for (auto& [name, t] : stored)
    if (name != "model.layers.1.mlp.up_proj.weight") kept.emplace_back(name, t);
  WriteSafetensors(file, kept);
  Status s = ExpectBurstError([&] { LoadModel(dir.path()); }, Code::kInvalidArgument,
                              {"model.layers.1.mlp.up_proj.weight"});
  EXPECT_EQ(s.param(), "model.layers.1.mlp.up_proj.weight");

  // Untied config without lm_head.weight: missing too.
  stored.erase("lm_head.weight");
  WriteSafetensors(file, NamedTensors(stored.begin(), stored.end()));
  ExpectBurstError([&] { LoadModel(dir.path()); }, Code::kInvalidArgument, {"lm_head.weight"});
}

TEST(HfIo, ExtraTensorIsNamed) {
  TempDir dir;
  LlamaModel m = IoTestModel();
  SaveModel(m, dir.path());
  const fs::path file = dir / "model.safetensors";
  TensorMap stored = ReadSafetensors(file);
  NamedTensors all(stored.begin(), stored.end());
  all.emplace_back("model.layers.0.mlp.mystery_proj.weight", torch::ones({4, 4}));
  WriteSafetensors(file, all);
  Status s = ExpectBurstError([&] { LoadModel(dir.path()); }, Code::kInvalidArgument,
                              {"model.layers.0.mlp.mystery_proj.weight", file.string()});
  EXPECT_EQ(s.param(), "model.layers.0.mlp.mystery_proj.weight");

  // A layer beyond num_hidden_layers is unknown too.
  TempDir dir2;
  SaveModel(m, dir2.path());
  EditConfig(dir2.path(), [](Json& j) { j["num_hidden_layers"] = 1; });
  ExpectBurstError([&] { LoadModel(dir2.path()); }, Code::kInvalidArgument, {"model.layers.1."});
}

// transformers 5 writes "rope_parameters" and "dtype" where 4.x wrote
// "rope_theta", "rope_scaling" and "torch_dtype"; both read the same.
TEST(HfIo, ConfigOfTransformers5ReadsAsOf4) {
  TempDir dir;
  LlamaModel m = IoTestModel();
  SaveModel(m, dir.path());
  EditConfig(dir.path(), [](Json& j) {
    for (const char* k : {"rope_theta", "rope_scaling", "torch_dtype"}) j.erase(k);
    j["dtype"] = "bfloat16";
    j["rope_parameters"] = {{"rope_type", "llama3"},   {"rope_theta", 500000.0},
                            {"factor", 8.0},           {"low_freq_factor", 1.0},
                            {"high_freq_factor", 4.0}, {"original_max_position_embeddings", 8}};
  });
  LlamaConfig cfg = LoadConfig(dir.path());
  EXPECT_EQ(cfg.rope_theta, 500000.0);
  EXPECT_EQ(cfg.rope_scaling.value("rope_type", ""), "llama3");
  EXPECT_EQ(cfg.rope_scaling.value("factor", 0.0), 8.0);
  EXPECT_EQ(cfg.torch_dtype, "bfloat16");
  // The default rope type is no scaling.
  EditConfig(dir.path(), [](Json& j) {
    j["rope_parameters"] = {{"rope_type", "default"}, {"rope_theta", 1e6}};
  });
  cfg = LoadConfig(dir.path());
  EXPECT_EQ(cfg.rope_theta, 1e6);
  EXPECT_TRUE(cfg.rope_scaling.is_null()) << cfg.rope_scaling.dump();
  // Bad ones name the field.
  EditConfig(dir.path(), [](Json& j) { j["rope_parameters"] = "linear"; });
  ExpectBurstError([&] { LoadConfig(dir.path()); }, Code::kInvalidArgument, {"rope_parameters"});
  EditConfig(dir.path(), [](Json& j) { j["rope_parameters"] = {{"rope_type", "dynamic"}, {"factor", 4.0}}; });
  ExpectBurstError([&] { LoadConfig(dir.path()); }, Code::kUnimplemented, {"dynamic"});
  EditConfig(dir.path(), [](Json& j) { j["rope_parameters"] = {{"rope_theta", "big"}}; });
  ExpectBurstError([&] { LoadConfig(dir.path()); }, Code::kInvalidArgument, {"rope_theta"});
}

TEST(HfIo, MissingFolderOrFilesAreNotFound) {
  TempDir dir;
  ExpectBurstError([&] { LoadModel(dir / "does-not-exist"); }, Code::kNotFound, {"does-not-exist"});
  ExpectBurstError([&] { LoadConfig(dir / "does-not-exist"); }, Code::kNotFound);
  // A folder with a config but no weights.
  LlamaModel m = IoTestModel();
  SaveModel(m, dir.path());
  fs::remove(dir / "model.safetensors");
  ExpectBurstError([&] { LoadModel(dir.path()); }, Code::kNotFound, {"model.safetensors"});
}

TEST(HfIo, SaveRefusesUnmergedLora) {
  TempDir dir;
  LlamaModel m = IoTestModel();
  m.AddLora(Spec(), 1);
  EXPECT_THROW(SaveModel(m, dir.path()), Error);
}

// ----------------------------------------------------------------------------
// adapters

TEST(HfIo, AdapterFilesFollowPeft) {
  TempDir dir;
  LlamaModel m = IoTestModel();
  m.AddLora(Spec(4, 8.0), 3);
  test_util::RandomizeLora(m, 9);
  SaveAdapter(m, dir.path(), "my/base");
  EXPECT_TRUE(IsAdapterDir(dir.path()));
  ASSERT_TRUE(fs::exists(dir / "adapter_config.json"));
  ASSERT_TRUE(fs::exists(dir / "adapter_model.safetensors"));
  Json cfg = ParseJson(ReadFile(dir / "adapter_config.json"), "adapter_config.json");
  EXPECT_EQ(cfg["peft_type"], "LORA");
  EXPECT_EQ(cfg["r"].get<int64_t>(), 4);
  EXPECT_EQ(cfg["lora_alpha"].get<double>(), 8.0);
  EXPECT_EQ(cfg["base_model_name_or_path"], "my/base");
  std::set<std::string> targets;
  for (const auto& t : cfg["target_modules"]) targets.insert(t.get<std::string>());
  EXPECT_EQ(targets, (std::set<std::string>{"q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj",
                                            "down_proj"}));

  TensorMap stored = ReadSafetensors(dir / "adapter_model.safetensors");
  std::set<std::string> want;
  for (int layer = 0; layer < 2; ++layer) {
    for (std::string t : {"q_proj", "k_proj", "v_proj", "o_proj"}) {
      for (std::string ab : {"A", "B"})
        want.insert("base_model.model.model.layers." + std::to_string(layer) + ".self_attn." + t + ".lora_" +
                    ab + ".weight");
    }
    for (std::string t : {"gate_proj", "up_proj", "down_proj"}) {
      for (std::string ab : {"A", "B"})
        want.insert("base_model.model.model.layers." + std::to_string(layer) + ".mlp." + t + ".lora_" + ab +
                    ".weight");
    }
  }
  std::set<std::string> got;
  for (const auto& [name, t] : stored) got.insert(name);
  EXPECT_EQ(got, want);
  ASSERT_TRUE(stored.count("base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight"));
  ASSERT_TRUE(stored.count("base_model.model.model.layers.0.mlp.down_proj.lora_B.weight"));
  // PEFT shapes: A (r, in), B (out, r).
  EXPECT_EQ(stored.at("base_model.model.model.layers.0.self_attn.k_proj.lora_A.weight").sizes().vec(),
            (std::vector<int64_t>{4, 64}));
  EXPECT_EQ(stored.at("base_model.model.model.layers.0.self_attn.k_proj.lora_B.weight").sizes().vec(),
            (std::vector<int64_t>{32, 4}));
  EXPECT_EQ(stored.at("base_model.model.model.layers.1.mlp.down_proj.lora_A.weight").sizes().vec(),
            (std::vector<int64_t>{4, 176}));
  EXPECT_EQ(stored.at("base_model.model.model.layers.1.mlp.down_proj.lora_B.weight").sizes().vec(),
            (std::vector<int64_t>{64, 4}));
  // Values are the model's.
  for (const auto& [name, t] : m.LoraWeights()) EXPECT_TRUE(torch::equal(stored.at(name), t)) << name;
}

TEST(HfIo, AdapterReloadGivesIdenticalLogits) {
  TempDir dir;
  LlamaModel m = IoTestModel(false, 6);
  LoraSpec spec = Spec(4, 8.0);
  spec.targets = {"q_proj", "v_proj", "down_proj"};
  m.AddLora(spec, 3);
  test_util::RandomizeLora(m, 10);
  SaveAdapter(m, dir.path(), "base");

  LlamaModel fresh = IoTestModel(false, 6);
  torch::NoGradGuard no_grad;
  torch::Tensor ids = RandomIds(2, 9, 279, 4);
  torch::Tensor base_logits = fresh.Forward(ids);
  LoadAdapter(fresh, dir.path());
  ASSERT_TRUE(fresh.lora.has_value());
  EXPECT_EQ(fresh.lora->rank, 4);
  EXPECT_EQ(fresh.lora->alpha, 8.0);
  EXPECT_EQ(fresh.lora->targets, spec.targets);
  EXPECT_EQ(fresh.LoraWeights().size(), 2u * 3u * 2u);
  torch::Tensor logits = fresh.Forward(ids);
  EXPECT_TRUE(torch::equal(logits, m.Forward(ids)));
  EXPECT_GT(RelErr(logits, base_logits), 1e-4) << "the adapter should change the logits";

  // Loading replaces a previous adapter entirely.
  TempDir dir2;
  LlamaModel other = IoTestModel(false, 6);
  other.AddLora(Spec(2, 4.0), 5);
  test_util::RandomizeLora(other, 11);
  SaveAdapter(other, dir2.path(), "base");
  LoadAdapter(fresh, dir2.path());
  EXPECT_EQ(fresh.lora->rank, 2);
  EXPECT_EQ(fresh.LoraWeights().size(), 2u * 7u * 2u);
  EXPECT_TRUE(torch::equal(fresh.Forward(ids), other.Forward(ids)));
}

TEST(HfIo, AdapterShortTargetNamesAreAccepted) {
  TempDir dir;
  LlamaModel m = IoTestModel(false, 6);
  LoraSpec spec = Spec(4, 8.0);
  spec.targets = {"q_proj", "gate_proj"};
  m.AddLora(spec, 3);
  test_util::RandomizeLora(m, 12);
  SaveAdapter(m, dir.path(), "base");
  fs::path cfg_path = dir / "adapter_config.json";
  Json cfg = ParseJson(ReadFile(cfg_path), cfg_path.string());
  cfg["target_modules"] = {"q", "gate"};
  WriteFileAtomic(cfg_path, cfg.dump());
  LlamaModel fresh = IoTestModel(false, 6);
  LoadAdapter(fresh, dir.path());
  EXPECT_EQ(fresh.lora->targets, (std::vector<std::string>{"q_proj", "gate_proj"}));
  torch::NoGradGuard no_grad;
  torch::Tensor ids = RandomIds(1, 6, 279, 5);
  EXPECT_TRUE(torch::equal(fresh.Forward(ids), m.Forward(ids)));
}

TEST(HfIo, AdapterWithWrongShapesFailsAndLeavesModelUntouched) {
  TempDir dir;
  // An adapter made for a model with a narrower MLP.
  LlamaConfig narrow = TinyConfig();
  narrow.intermediate_size = 128;
  LlamaModel other = LlamaModel::Random(narrow, 3, 0.08);
  other.AddLora(Spec(), 4);
  test_util::RandomizeLora(other, 13);
  SaveAdapter(other, dir.path(), "other");

  LlamaModel m = IoTestModel(false, 7);
  torch::NoGradGuard no_grad;
  torch::Tensor ids = RandomIds(1, 7, 279, 6);
  torch::Tensor before = m.Forward(ids);
  Status s = ExpectBurstError([&] { LoadAdapter(m, dir.path()); }, Code::kInvalidArgument,
                              {"adapter_model.safetensors", "gate_proj", "do not fit"});
  EXPECT_FALSE(m.lora.has_value());
  for (const auto& l : m.layers) EXPECT_TRUE(l.lora.empty());
  EXPECT_TRUE(m.LoraWeights().empty());
  EXPECT_TRUE(torch::equal(m.Forward(ids), before));

  // A model that had an adapter keeps it after a failed load.
  m.AddLora(Spec(2, 4.0), 8);
  test_util::RandomizeLora(m, 14);
  torch::Tensor with_lora = m.Forward(ids);
  EXPECT_THROW(LoadAdapter(m, dir.path()), Error);
  ASSERT_TRUE(m.lora.has_value());
  EXPECT_EQ(m.lora->rank, 2);
  EXPECT_TRUE(torch::equal(m.Forward(ids), with_lora));
}

TEST(HfIo, AdapterWithStrayTensorOrMissingFilesFails) {
  TempDir dir;
  LlamaModel m = IoTestModel(false, 8);
  m.AddLora(Spec(), 4);
  SaveAdapter(m, dir.path(), "base");
  const fs::path file = dir / "adapter_model.safetensors";
  TensorMap stored = ReadSafetensors(file);
  NamedTensors all(stored.begin(), stored.end());
  all.emplace_back("base_model.model.model.layers.5.self_attn.q_proj.lora_A.weight", torch::zeros({4, 64}));
  WriteSafetensors(file, all);
  LlamaModel fresh = IoTestModel(false, 8);
  ExpectBurstError([&] { LoadAdapter(fresh, dir.path()); }, Code::kInvalidArgument,
                   {"base_model.model.model.layers.5.self_attn.q_proj.lora_A.weight"});
  EXPECT_FALSE(fresh.lora.has_value());

  // A missing pair names it.
  stored.erase("base_model.model.model.layers.1.mlp.up_proj.lora_B.weight");
  WriteSafetensors(file, NamedTensors(stored.begin(), stored.end()));
  ExpectBurstError([&] { LoadAdapter(fresh, dir.path()); }, Code::kInvalidArgument,
                   {"base_model.model.model.layers.1.mlp.up_proj"});
  EXPECT_FALSE(fresh.lora.has_value());

  // No adapter_config.json: not found.
  TempDir empty;
  EXPECT_FALSE(IsAdapterDir(empty.path()));
  ExpectBurstError([&] { LoadAdapter(fresh, empty.path()); }, Code::kNotFound);
}

TEST(HfIo, MergedLoraMatchesLoraForward) {
  for (bool tied : {false, true}) {
    SCOPED_TRACE(tied);
    LlamaModel m = IoTestModel(tied, 9);
    m.AddLora(Spec(4, 8.0), 5);
    test_util::RandomizeLora(m, 15, 0.05);
    torch::NoGradGuard no_grad;
    torch::Tensor ids = RandomIds(2, 10, 279, 7);
    torch::Tensor lora_logits = m.Forward(ids);
    LlamaModel base = IoTestModel(tied, 9);
    EXPECT_GT(RelErr(lora_logits, base.Forward(ids)), 1e-4);
    m.MergeLora();
    EXPECT_FALSE(m.lora.has_value());
    EXPECT_TRUE(m.LoraWeights().empty());
    EXPECT_LE(RelErr(m.Forward(ids), lora_logits), 1e-5);
    // Merged model saves and reloads as a plain model.
    TempDir dir;
    SaveModel(m, dir.path());
    EXPECT_LE(RelErr(LoadModel(dir.path()).Forward(ids), lora_logits), 1e-5);
  }
}

TEST(HfIo, NormalizeLoraTarget) {
  EXPECT_EQ(NormalizeLoraTarget("q", "lora.targets"), "q_proj");
  EXPECT_EQ(NormalizeLoraTarget("q_proj", "lora.targets"), "q_proj");
  EXPECT_EQ(NormalizeLoraTarget("gate", "lora.targets"), "gate_proj");
  EXPECT_EQ(NormalizeLoraTarget("down_proj", "lora.targets"), "down_proj");
  Status s =
      ExpectBurstError([] { NormalizeLoraTarget("qkv", "lora.targets"); }, Code::kInvalidArgument, {"qkv"});
  EXPECT_EQ(s.param(), "lora.targets");
  EXPECT_EQ(NormalizeLoraTarget("lm_head", "x"), "lm_head");
  ExpectBurstError([] { NormalizeLoraTarget("embed_tokens", "x"); }, Code::kInvalidArgument,
                   {"embed_tokens", "lm_head"});
}

TEST(HfIo, CopyTokenizerFiles) {
  TempDir dir;
  const fs::path fixture = fs::path(BURST_SOURCE_DIR) / "tests/fixtures/tiny-bpe";
  CopyTokenizerFiles(fixture, dir / "out");
  EXPECT_TRUE(fs::exists(dir / "out" / "tokenizer.json"));
  EXPECT_TRUE(fs::exists(dir / "out" / "tokenizer_config.json"));
  EXPECT_FALSE(fs::exists(dir / "out" / "tokenizer.model"));
  EXPECT_EQ(ReadFile(dir / "out" / "tokenizer.json"), ReadFile(fixture / "tokenizer.json"));
}

}  // namespace
}  // namespace burst
