#include "model/hf_io.h"

#include <cstdio>
#include <optional>
#include <set>

#include "core/fs.h"
#include "core/json.h"
#include "core/status.h"
#include "model/lora_experts.h"

namespace burst {
namespace {

// Expected shape of each Hugging Face weight, from the config.
std::map<std::string, std::vector<int64_t>> ExpectedShapes(const LlamaConfig& c) {
  std::map<std::string, std::vector<int64_t>> s;
  const int64_t q = c.num_attention_heads * c.head_dim, kv = c.num_key_value_heads * c.head_dim;
  const int64_t h = c.hidden_size, f = c.intermediate_size;
  s["model.embed_tokens.weight"] = {c.vocab_size, h};
  for (int64_t i = 0; i < c.num_hidden_layers; ++i) {
    std::string p = "model.layers." + std::to_string(i) + ".";
    s[p + "input_layernorm.weight"] = {h};
    s[p + "self_attn.q_proj.weight"] = {q, h};
    s[p + "self_attn.k_proj.weight"] = {kv, h};
    s[p + "self_attn.v_proj.weight"] = {kv, h};
    s[p + "self_attn.o_proj.weight"] = {h, q};
    if (c.HasQkvBias()) {
      s[p + "self_attn.q_proj.bias"] = {q};
      s[p + "self_attn.k_proj.bias"] = {kv};
      s[p + "self_attn.v_proj.bias"] = {kv};
    }
    if (c.attention_bias) s[p + "self_attn.o_proj.bias"] = {h};
    if (c.qk_norm) {
      s[p + "self_attn.q_norm.weight"] = {c.head_dim};
      s[p + "self_attn.k_norm.weight"] = {c.head_dim};
    }
    s[p + "post_attention_layernorm.weight"] = {h};
    if (c.gemma) {
      s[p + "pre_feedforward_layernorm.weight"] = {h};
      s[p + "post_feedforward_layernorm.weight"] = {h};
    }
    if (c.IsMoeLayer(i)) {
      s[c.ExpertWeightName(i, -1)] = {c.num_experts, h};
      for (int64_t e = 0; e < c.num_experts; ++e) {
        s[c.ExpertWeightName(i, e, "gate")] = {c.moe_intermediate_size, h};
        s[c.ExpertWeightName(i, e, "up")] = {c.moe_intermediate_size, h};
        s[c.ExpertWeightName(i, e, "down")] = {h, c.moe_intermediate_size};
      }
      continue;
    }
    s[p + "mlp.gate_proj.weight"] = {f, h};
    s[p + "mlp.up_proj.weight"] = {f, h};
    s[p + "mlp.down_proj.weight"] = {h, f};
  }
  s["model.norm.weight"] = {h};
  if (!c.tie_word_embeddings) s["lm_head.weight"] = {c.vocab_size, h};
  return s;
}

std::string ShapeString(c10::IntArrayRef shape) {
  std::string out = "[";
  for (size_t i = 0; i < shape.size(); ++i) out += (i ? ", " : "") + std::to_string(shape[i]);
  return out + "]";
}

// name -> (tensor, file it came from), across one file or all shards.
std::map<std::string, std::pair<torch::Tensor, std::string>> ReadWeights(const fs::path& dir) {
  std::vector<fs::path> files;
  fs::path single = dir / "model.safetensors", index = dir / "model.safetensors.index.json";
  if (fs::exists(single)) {
    files.push_back(single);
  } else if (fs::exists(index)) {
    Json idx = ParseJson(ReadFile(index), index.string());
    if (!idx.contains("weight_map") || !idx["weight_map"].is_object()) {
      throw Error(Code::kDataLoss, index.string() + ": missing weight_map", index.string());
    }
    std::set<std::string> names;
    for (auto it = idx["weight_map"].begin(); it != idx["weight_map"].end(); ++it)
      names.insert(it->get<std::string>());
    for (const auto& n : names) files.push_back(dir / n);
  } else {
    throw Error(Code::kNotFound,
                dir.string() + ": no model.safetensors or model.safetensors.index.json " +
                    "(Burst reads Hugging Face safetensors folders)",
                dir.string());
  }
  std::map<std::string, std::pair<torch::Tensor, std::string>> out;
  for (const auto& f : files) {
    for (auto& [name, t] : ReadSafetensors(f)) out[name] = {t, f.string()};
  }
  return out;
}

void WriteJson(const fs::path& path, const Json& j) { WriteFileAtomic(path, j.dump(2) + "\n"); }

}  // namespace

LlamaModel LoadModel(const fs::path& model_dir, torch::Device device, torch::ScalarType dtype) {
  LlamaConfig config = LoadConfig(model_dir);
  auto weights = ReadWeights(model_dir);
  auto expected = ExpectedShapes(config);
  for (const auto& [name, entry] : weights) {
    if (name.find("rotary_emb.inv_freq") != std::string::npos) continue;  // old HF buffers
    if (config.tie_word_embeddings && name == "lm_head.weight") continue;
    if (!expected.count(name)) {
      throw Error(Code::kInvalidArgument,
                  entry.second + ": tensor " + name + " is not part of the model that " +
                      (model_dir / "config.json").string() + " describes",
                  name);
    }
  }
  LlamaModel model;
  model.config = config;
  model.layers.resize(static_cast<size_t>(config.num_hidden_layers));
  for (auto& [name, slot] : model.BaseWeightSlots()) {
    auto it = weights.find(name);
    if (it == weights.end()) {
      throw Error(Code::kInvalidArgument,
                  model_dir.string() + ": weight " + name + " is missing from the safetensors files", name);
    }
    const torch::Tensor& t = it->second.first;
    if (t.sizes().vec() != expected[name]) {
      throw Error(Code::kInvalidArgument,
                  it->second.second + ": tensor " + name + " has shape " + ShapeString(t.sizes()) +
                      " but config.json implies " + ShapeString(expected[name]),
                  name);
    }
    if (!t.is_floating_point()) {
      throw Error(Code::kInvalidArgument, it->second.second + ": tensor " + name + " is not floating point",
                  name);
    }
    *slot = t;
  }
  if (config.tie_word_embeddings) model.lm_head = model.embed;
  if (dtype == torch::kFloat32) {
    model.To(device);
  } else {
    torch::NoGradGuard no_grad;
    for (auto& [name, slot] : model.BaseWeightSlots()) *slot = slot->to(dtype).to(device).contiguous();
    if (config.tie_word_embeddings) model.lm_head = model.embed;
    model.device = device;
  }
  // q/k/v and gate/up as one matrix each (LlamaLayer::qkv_proj): every
  // frozen use (LoRA, sampling, a DPO reference) does one GEMM where it did
  // three or two, and all of them compute alike; a full fine-tune unfuses
  // (Unfuse) to train the weights one by one.
  model.FreezeBaseAs(dtype);
  return model;
}

void SaveModel(const LlamaModel& model, const fs::path& dir, const SaveOptions& options) {
  if (model.lora) {
    throw Error(Code::kInternal, "SaveModel needs merged weights; merge the LoRA adapter first");
  }
  fs::create_directories(dir);
  LlamaConfig config = model.config;
  config.torch_dtype = options.dtype == torch::kBFloat16  ? "bfloat16"
                       : options.dtype == torch::kFloat16 ? "float16"
                                                          : "float32";
  NamedTensors tensors;
  for (auto& [name, t] : model.BaseWeights()) tensors.emplace_back(name, t.to(options.dtype));
  int64_t total = 0;
  for (auto& [name, t] : tensors) total += t.numel() * t.element_size();
  if (options.max_shard_bytes <= 0 || total <= options.max_shard_bytes) {
    WriteSafetensors(dir / "model.safetensors", tensors, {{"format", "pt"}});
  } else {
    std::vector<NamedTensors> shards(1);
    int64_t in_shard = 0;
    for (auto& nt : tensors) {
      int64_t bytes = nt.second.numel() * nt.second.element_size();
      if (in_shard > 0 && in_shard + bytes > options.max_shard_bytes) {
        shards.emplace_back();
        in_shard = 0;
      }
      shards.back().push_back(nt);
      in_shard += bytes;
    }
    Json weight_map = Json::object();
    for (size_t i = 0; i < shards.size(); ++i) {
      char name[64];
      std::snprintf(name, sizeof(name), "model-%05zu-of-%05zu.safetensors", i + 1, shards.size());
      WriteSafetensors(dir / name, shards[i], {{"format", "pt"}});
      for (auto& [tn, t] : shards[i]) weight_map[tn] = name;
    }
    WriteJson(dir / "model.safetensors.index.json",
              {{"metadata", {{"total_size", total}}}, {"weight_map", weight_map}});
  }
  WriteJson(dir / "config.json", config.ToJson());
}

bool IsAdapterDir(const fs::path& dir) { return fs::exists(dir / "adapter_config.json"); }

void SaveAdapter(const LlamaModel& model, const fs::path& dir, const std::string& base_model) {
  if (!model.lora) throw Error(Code::kInternal, "model has no LoRA adapter to save");
  fs::create_directories(dir);
  const LoraSpec& spec = *model.lora;
  Json cfg = {{"peft_type", "LORA"},
              {"task_type", "CAUSAL_LM"},
              {"base_model_name_or_path", base_model},
              {"r", spec.rank},
              {"lora_alpha", spec.alpha},
              {"lora_dropout", spec.dropout},
              {"target_modules", spec.targets},
              {"bias", "none"},
              {"fan_in_fan_out", false},
              {"inference_mode", true},
              {"init_lora_weights", true},
              {"modules_to_save", nullptr},
              {"use_rslora", false},
              {"use_dora", false},
              {"layers_to_transform", nullptr},
              {"revision", nullptr}};
  WriteExpertAdapterConfig(model, cfg);
  WriteSafetensors(dir / "adapter_model.safetensors", model.LoraWeights(), {{"format", "pt"}});
  WriteJson(dir / "adapter_config.json", cfg);
}

void LoadAdapter(LlamaModel& model, const fs::path& adapter_dir) {
  fs::path cfg_path = adapter_dir / "adapter_config.json";
  if (!fs::exists(cfg_path)) {
    throw Error(Code::kNotFound,
                adapter_dir.string() + ": no adapter_config.json (not a PEFT adapter folder)",
                adapter_dir.string());
  }
  Json cfg = ParseJson(ReadFile(cfg_path), cfg_path.string());
  const std::string where = cfg_path.string();
  if (cfg.value("peft_type", "LORA") != "LORA") {
    throw Error(Code::kUnimplemented,
                where + ": peft_type " + cfg["peft_type"].dump() + " is not supported (LORA only)",
                "peft_type");
  }
  if (cfg.value("use_dora", false) || cfg.value("use_rslora", false)) {
    throw Error(Code::kUnimplemented, where + ": use_dora / use_rslora are not supported", "use_dora");
  }
  LoraSpec spec;
  try {
    spec.rank = cfg.value("r", 8);
    spec.alpha = cfg.value("lora_alpha", 8.0);
    spec.dropout = cfg.value("lora_dropout", 0.0);
  } catch (const Json::exception& e) {
    throw Error(Code::kInvalidArgument, where + ": r, lora_alpha or lora_dropout has the wrong type", "r");
  }
  spec.targets.clear();
  if (!cfg.contains("target_modules") || !cfg["target_modules"].is_array()) {
    throw Error(Code::kUnimplemented, where + ": target_modules must be a list of module names",
                "target_modules");
  }
  for (const auto& t : cfg["target_modules"])
    spec.targets.push_back(NormalizeLoraTarget(t.get<std::string>(), where + ": target_modules"));
  // A mixture of experts' pairs (target_parameters; rank and alpha patterns
  // for its fused gate_up only): lora_experts.h.
  const ExpertAdapter experts = ReadExpertAdapterConfig(cfg, model.config, spec, where);
  if (experts.gate_up) spec.targets.insert(spec.targets.end(), {"gate_proj", "up_proj"});
  if (experts.down) spec.targets.push_back("down_proj");
  if (Status s = CheckExpertLora(model.config, spec, "target_parameters"); !s.ok()) throw Error(s);
  fs::path weights_path = adapter_dir / "adapter_model.safetensors";
  TensorMap weights = ReadSafetensors(weights_path);
  // Build the new pairs aside, then swap in, so a failure leaves `model` as it was.
  std::map<std::string, torch::Tensor> base;
  for (auto& [n, t] : model.BaseWeights()) base[n] = t;
  std::vector<std::map<std::string, LoraPair>> pairs(model.layers.size());
  std::optional<LoraPair> head_pair;
  std::set<std::string> used;
  // The pair of module path `p` (PEFT's name), checked against base weight w.
  auto take = [&](const std::string& p, const std::string& target, const torch::Tensor& w) {
    auto a = weights.find(p + ".lora_A.weight"), b = weights.find(p + ".lora_B.weight");
    if (a == weights.end() || b == weights.end()) {
      throw Error(Code::kInvalidArgument,
                  weights_path.string() + ": missing " + p + ".lora_A/B.weight for target " + target, p);
    }
    used.insert(a->first);
    used.insert(b->first);
    LoraPair pair{a->second.to(torch::kFloat32), b->second.to(torch::kFloat32)};
    if (pair.a.dim() != 2 || pair.b.dim() != 2 || pair.a.size(0) != spec.rank ||
        pair.b.size(1) != spec.rank || pair.a.size(1) != w.size(1) || pair.b.size(0) != w.size(0)) {
      throw Error(Code::kInvalidArgument,
                  weights_path.string() + ": " + p + " lora_A " + ShapeString(pair.a.sizes()) + " / lora_B " +
                      ShapeString(pair.b.sizes()) + " do not fit base weight " + ShapeString(w.sizes()) +
                      " with r=" + std::to_string(spec.rank),
                  p);
    }
    pair.a = pair.a.to(model.device).contiguous();
    pair.b = pair.b.to(model.device).contiguous();
    return pair;
  };
  for (const auto& target : spec.targets) {
    if (target == "lm_head") {
      head_pair = take("base_model.model.lm_head", target, model.lm_head);
      continue;
    }
    for (size_t i = 0; i < model.layers.size(); ++i) {
      bool attn = target == "q_proj" || target == "k_proj" || target == "v_proj" || target == "o_proj";
      if (!attn && model.config.num_experts > 0) continue;  // the experts' pairs, below
      std::string p =
          "base_model.model.model.layers." + std::to_string(i) + (attn ? ".self_attn." : ".mlp.") + target;
      auto w = base.find(p.substr(std::string("base_model.model.").size()) + ".weight");
      if (w == base.end()) continue;  // a mixture of experts' layer: no dense MLP to adapt
      pairs[i].emplace(target, take(p, target, w->second));
    }
  }
  std::vector<std::map<std::string, LoraPair>> expert_pairs =
      TakeExpertPairs(model, experts, spec.rank, weights, weights_path.string(), &used);
  for (const auto& [name, t] : weights) {
    if (!used.count(name)) {
      throw Error(Code::kInvalidArgument,
                  weights_path.string() + ": tensor " + name +
                      " does not match this model or the adapter's target_modules",
                  name);
    }
  }
  for (size_t i = 0; i < model.layers.size(); ++i) {
    model.layers[i].lora = std::move(pairs[i]);
    model.layers[i].expert_lora = std::move(expert_pairs[i]);
  }
  model.head_lora = std::move(head_pair);
  model.lora = spec;
}

void CopyTokenizerFiles(const fs::path& from, const fs::path& to) {
  fs::create_directories(to);
  for (const char* name : {"tokenizer.model", "tokenizer.json", "tokenizer_config.json",
                           "special_tokens_map.json", "generation_config.json"}) {
    if (fs::exists(from / name)) {
      fs::copy_file(from / name, to / name, fs::copy_options::overwrite_existing);
    }
  }
}

}  // namespace burst
