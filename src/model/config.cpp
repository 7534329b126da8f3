#include "model/config.h"

#include <cmath>
#include <map>

#include "core/fs.h"

namespace burst {
namespace {

int64_t RequireInt(const Json& j, const char* key, const std::string& where) {
  auto it = j.find(key);
  if (it == j.end() || !it->is_number_integer() || it->get<int64_t>() <= 0) {
    throw Error(Code::kInvalidArgument,
                where + ": field " + key + " must be a positive integer" +
                    (it == j.end() ? " (missing)" : ", got " + it->dump()),
                key);
  }
  return it->get<int64_t>();
}

template <typename T>
T Optional(const Json& j, const char* key, T def, const std::string& where) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return def;
  try {
    return it->get<T>();
  } catch (const std::exception&) {
    throw Error(Code::kInvalidArgument, where + ": field " + key + " has the wrong type: " + it->dump(), key);
  }
}

// The families Burst runs, and the class transformers loads each with.
const std::map<std::string, std::string>& Families() {
  static const std::map<std::string, std::string> families = {
      {"llama", "LlamaForCausalLM"},        {"mistral", "MistralForCausalLM"},
      {"qwen2", "Qwen2ForCausalLM"},        {"qwen3", "Qwen3ForCausalLM"},
      {"qwen3_moe", "Qwen3MoeForCausalLM"}, {"mixtral", "MixtralForCausalLM"},
      {"gemma3_text", "Gemma3ForCausalLM"}};
  return families;
}

// The shortest window of a layer that attends through one (0: none), as
// transformers decides which layers do: "layer_types" where the config
// lists them, else Mistral's "sliding_window" for every layer, else Qwen's
// "use_sliding_window" for the layers from "max_window_layers" on.
int64_t AttentionWindow(const Json& j, const std::string& model_type, int64_t layers,
                        const std::string& where) {
  // Gemma 3's config class defaults its window to 4096.
  const int64_t window =
      Optional<int64_t>(j, "sliding_window", model_type == "gemma3_text" ? 4096 : 0, where);
  bool windowed = false;
  if (j.contains("layer_types") && !j["layer_types"].is_null()) {
    const Json& types = j["layer_types"];
    if (!types.is_array() || static_cast<int64_t>(types.size()) != layers) {
      throw Error(Code::kInvalidArgument,
                  where + ": field layer_types must list one type per layer (" + std::to_string(layers) + ")",
                  "layer_types");
    }
    for (const Json& t : types) {
      const std::string type = t.is_string() ? t.get<std::string>() : t.dump();
      if (type == "sliding_attention") {
        windowed = true;
      } else if (type != "full_attention") {
        throw Error(Code::kUnimplemented,
                    where + ": layer_types has \"" + type +
                        "\" (Burst runs full_attention and sliding_attention layers)",
                    "layer_types");
      }
    }
  } else if (model_type == "mistral" || model_type == "mixtral") {
    windowed = window > 0;
  } else if (model_type == "qwen3_moe") {
    windowed = Optional<bool>(j, "use_sliding_window", false, where) && window > 0;
  } else if (model_type == "gemma3_text") {  // every layer but each sliding_window_pattern-th
    windowed = Optional<int64_t>(j, "sliding_window_pattern", 6, where) > 1;
  } else if (model_type == "qwen2" || model_type == "qwen3") {
    windowed = Optional<bool>(j, "use_sliding_window", false, where) &&
               layers > Optional<int64_t>(j, "max_window_layers", 28, where);
  }
  if (!windowed) return 0;
  if (window <= 0) {
    throw Error(Code::kInvalidArgument,
                where + ": layers attend through a sliding window but sliding_window is " +
                    (j.contains("sliding_window") ? j["sliding_window"].dump() : "missing"),
                "sliding_window");
  }
  return window;
}

// The mixture of experts of qwen3_moe and mixtral; what their configs hold
// that Burst cannot run exactly is refused.
void ReadExperts(const Json& j, const std::string& model_type, const std::string& where, LlamaConfig& c) {
  if (model_type == "qwen3_moe") {
    // Qwen's own configs write num_experts; transformers 5 writes the same
    // value as num_local_experts.
    c.num_experts =
        Optional<int64_t>(j, "num_experts", Optional<int64_t>(j, "num_local_experts", 128, where), where);
    c.num_experts_per_tok = Optional<int64_t>(j, "num_experts_per_tok", 8, where);
    c.moe_intermediate_size = Optional<int64_t>(j, "moe_intermediate_size", 768, where);
    c.norm_topk_prob = Optional<bool>(j, "norm_topk_prob", false, where);
    c.decoder_sparse_step = Optional<int64_t>(j, "decoder_sparse_step", 1, where);
    c.mlp_only_layers = Optional<std::vector<int64_t>>(j, "mlp_only_layers", {}, where);
  } else if (model_type == "mixtral") {
    c.num_experts = Optional<int64_t>(j, "num_local_experts", 8, where);
    c.num_experts_per_tok = Optional<int64_t>(j, "num_experts_per_tok", 2, where);
    c.moe_intermediate_size = c.intermediate_size;  // Mixtral's experts are its MLPs
    c.norm_topk_prob = true;                        // its router always renormalises
    const double jitter = Optional<double>(j, "router_jitter_noise", 0.0, where);
    if (jitter != 0.0) {
      throw Error(Code::kUnimplemented,
                  where + ": router_jitter_noise " + Json(jitter).dump() +
                      " is not supported (it scales the inputs by random noise in training)",
                  "router_jitter_noise");
    }
  } else {
    return;
  }
  const char* experts_field =
      model_type == "mixtral" || !j.contains("num_experts") ? "num_local_experts" : "num_experts";
  if (c.num_experts < 1 || c.num_experts_per_tok < 1 || c.num_experts_per_tok > c.num_experts) {
    throw Error(Code::kInvalidArgument,
                where + ": num_experts_per_tok (" + std::to_string(c.num_experts_per_tok) + ") must be 1.." +
                    experts_field + " (" + std::to_string(c.num_experts) + ")",
                "num_experts_per_tok");
  }
  if (c.moe_intermediate_size < 1 || c.decoder_sparse_step < 1) {
    throw Error(Code::kInvalidArgument,
                where + ": moe_intermediate_size and decoder_sparse_step must be positive",
                "moe_intermediate_size");
  }
  if (Optional<bool>(j, "output_router_logits", false, where)) {
    throw Error(Code::kUnimplemented,
                where +
                    ": output_router_logits true is not supported (Burst trains without the router's "
                    "auxiliary loss, as transformers does by default)",
                "output_router_logits");
  }
}

// Gemma 3's own fields: its layer types (listed, or every
// sliding_window_pattern-th layer global), the two rope bases (transformers
// 5: rope_parameters by layer type; 4.x: rope_theta, rope_local_base_freq,
// rope_scaling for the global layers), query_pre_attn_scalar; what it has
// that Burst does not run (soft-capping, bidirectional attention) refused.
void ReadGemma(const Json& j, const std::string& where, LlamaConfig& c) {
  for (const char* cap : {"attn_logit_softcapping", "final_logit_softcapping"}) {
    if (j.contains(cap) && !j[cap].is_null()) {
      throw Error(Code::kUnimplemented, where + ": " + cap + " " + j[cap].dump() + " is not supported", cap);
    }
  }
  if (Optional<bool>(j, "use_bidirectional_attention", false, where)) {
    throw Error(Code::kUnimplemented, where + ": use_bidirectional_attention true is not supported",
                "use_bidirectional_attention");
  }
  c.query_pre_attn_scalar = Optional<double>(j, "query_pre_attn_scalar", 256.0, where);
  c.sliding_layers.assign(static_cast<size_t>(c.num_hidden_layers), false);
  const int64_t pattern = Optional<int64_t>(j, "sliding_window_pattern", 6, where);
  if (pattern < 1) {
    throw Error(Code::kInvalidArgument, where + ": field sliding_window_pattern must be a positive integer",
                "sliding_window_pattern");
  }
  for (int64_t i = 0; i < c.num_hidden_layers; ++i) {
    const auto at = static_cast<size_t>(i);
    c.sliding_layers[at] = j.contains("layer_types") && j["layer_types"].is_array()
                               ? j["layer_types"][at] == "sliding_attention"
                               : (i + 1) % pattern != 0;
  }
  c.rope_theta = Optional<double>(j, "rope_theta", 1'000'000.0, where);
  c.local_rope_theta = Optional<double>(j, "rope_local_base_freq", 10'000.0, where);
  const Json rp = j.value("rope_parameters", Json());
  if (rp.is_object() && (rp.contains("full_attention") || rp.contains("sliding_attention"))) {
    c.rope_scaling = Json();
    if (rp.contains("full_attention") && rp["full_attention"].is_object()) {
      const Json& full = rp["full_attention"];
      c.rope_theta =
          Optional<double>(full, "rope_theta", c.rope_theta, where + ": rope_parameters.full_attention");
      if (full.value("rope_type", std::string("default")) != "default") c.rope_scaling = full;
    }
    if (rp.contains("sliding_attention") && rp["sliding_attention"].is_object()) {
      const Json& local = rp["sliding_attention"];
      c.local_rope_theta = Optional<double>(local, "rope_theta", c.local_rope_theta,
                                            where + ": rope_parameters.sliding_attention");
      if (local.value("rope_type", std::string("default")) != "default") {
        throw Error(Code::kUnimplemented,
                    where + ": rope_parameters.sliding_attention scales its rope (" + local.dump() +
                        "), which Burst does not",
                    "rope_parameters");
      }
    }
  }
}

}  // namespace

bool LlamaConfig::IsMoeLayer(int64_t i) const {
  if (num_experts <= 0) return false;
  for (int64_t dense : mlp_only_layers)
    if (dense == i) return false;
  return (i + 1) % decoder_sparse_step == 0;
}

std::string LlamaConfig::ExpertWeightName(int64_t layer, int64_t expert, const std::string& proj) const {
  const bool mixtral = model_type == "mixtral";
  const std::string moe =
      "model.layers." + std::to_string(layer) + (mixtral ? ".block_sparse_moe." : ".mlp.");
  if (expert < 0) return moe + "gate.weight";
  const std::string name = !mixtral ? proj + "_proj" : proj == "gate" ? "w1" : proj == "up" ? "w3" : "w2";
  return moe + "experts." + std::to_string(expert) + "." + name + ".weight";
}

std::string LlamaConfig::Architecture() const {
  auto it = Families().find(model_type);
  return it == Families().end() ? "LlamaForCausalLM" : it->second;
}

LlamaConfig LlamaConfig::FromJson(const Json& j, const std::string& where) {
  if (!j.is_object()) throw Error(Code::kInvalidArgument, where + ": not a JSON object", where);
  LlamaConfig c;
  c.raw = j;
  const std::string model_type = Optional<std::string>(j, "model_type", "llama", where);
  if (!Families().count(model_type)) {
    throw Error(Code::kUnimplemented,
                where + ": model_type \"" + model_type +
                    "\" is not supported (Burst runs llama, mistral, qwen2, qwen3, qwen3_moe, mixtral and "
                    "gemma3_text)",
                "model_type");
  }
  c.model_type = model_type;
  c.gemma = model_type == "gemma3_text";
  const char* act_field = c.gemma ? "hidden_activation" : "hidden_act";
  const std::string want_act = c.gemma ? "gelu_pytorch_tanh" : "silu";
  const std::string act = Optional<std::string>(j, act_field, want_act, where);
  if (act != want_act) {
    throw Error(Code::kUnimplemented,
                where + ": " + act_field + " \"" + act + "\" is not supported (" + model_type +
                    "'s MLP runs " + want_act + ")",
                act_field);
  }
  c.vocab_size = RequireInt(j, "vocab_size", where);
  c.hidden_size = RequireInt(j, "hidden_size", where);
  c.intermediate_size = RequireInt(j, "intermediate_size", where);
  c.num_hidden_layers = RequireInt(j, "num_hidden_layers", where);
  c.num_attention_heads = RequireInt(j, "num_attention_heads", where);
  c.num_key_value_heads = Optional<int64_t>(j, "num_key_value_heads", c.num_attention_heads, where);
  // Qwen 3's config class defaults head_dim to 128, not hidden / heads.
  c.head_dim = Optional<int64_t>(j, "head_dim",
                                 model_type == "qwen3" ? 128
                                 : c.gemma             ? 256
                                                       : c.hidden_size / c.num_attention_heads,
                                 where);
  if (c.head_dim <= 0)
    throw Error(Code::kInvalidArgument, where + ": field head_dim must be positive", "head_dim");
  c.max_position_embeddings = Optional<int64_t>(j, "max_position_embeddings", 2048, where);
  c.rms_norm_eps = Optional<double>(j, "rms_norm_eps", 1e-6, where);
  c.rope_theta = Optional<double>(j, "rope_theta", 10000.0, where);
  c.tie_word_embeddings = Optional<bool>(j, "tie_word_embeddings", c.gemma, where);
  // Qwen 2's q, k and v always have biases (its config has no field for
  // them); Mistral's and Qwen 2's attention_bias means nothing to transformers.
  if (model_type == "llama" || model_type == "qwen3" || c.gemma)
    c.attention_bias = Optional<bool>(j, "attention_bias", false, where);
  c.qkv_bias = model_type == "qwen2";
  c.qk_norm = model_type == "qwen3" || model_type == "qwen3_moe" || c.gemma;
  if (model_type == "qwen3_moe") c.attention_bias = Optional<bool>(j, "attention_bias", false, where);
  ReadExperts(j, model_type, where, c);
  if (model_type == "llama") c.mlp_bias = Optional<bool>(j, "mlp_bias", false, where);
  if (c.mlp_bias) {
    throw Error(Code::kUnimplemented, where + ": mlp_bias true is not supported (Burst's MLP has no biases)",
                "mlp_bias");
  }
  c.attention_window = AttentionWindow(j, model_type, c.num_hidden_layers, where);
  // transformers 5 writes "dtype" and "rope_parameters" ({rope_type,
  // rope_theta, and the scaling's own fields}) where 4.x wrote
  // "torch_dtype", "rope_theta" and "rope_scaling".
  c.torch_dtype =
      Optional<std::string>(j, "torch_dtype", Optional<std::string>(j, "dtype", "float32", where), where);
  if (j.contains("rope_scaling")) c.rope_scaling = j["rope_scaling"];
  if (j.contains("rope_parameters") && !j["rope_parameters"].is_null()) {
    const Json& rp = j["rope_parameters"];
    const std::string rp_where = where + ": rope_parameters";
    if (!rp.is_object()) {
      throw Error(Code::kInvalidArgument, rp_where + " must be an object", "rope_parameters");
    }
    c.rope_theta = Optional<double>(rp, "rope_theta", c.rope_theta, rp_where);
    if (Optional<std::string>(rp, "rope_type", "default", rp_where) != "default") c.rope_scaling = rp;
  }
  if (c.gemma) ReadGemma(j, where, c);
  if (j.contains("bos_token_id") && j["bos_token_id"].is_number_integer())
    c.bos_token_id = j["bos_token_id"].get<int64_t>();
  if (j.contains("eos_token_id")) {
    const Json& e = j["eos_token_id"];
    if (e.is_number_integer()) c.eos_token_ids.push_back(e.get<int64_t>());
    if (e.is_array())
      for (const auto& x : e) c.eos_token_ids.push_back(x.get<int64_t>());
  }
  if (c.num_attention_heads % c.num_key_value_heads != 0) {
    throw Error(Code::kInvalidArgument,
                where + ": num_attention_heads (" + std::to_string(c.num_attention_heads) +
                    ") must be a multiple of num_key_value_heads (" + std::to_string(c.num_key_value_heads) +
                    ")",
                "num_key_value_heads");
  }
  if (c.head_dim % 2 != 0) {
    throw Error(Code::kInvalidArgument, where + ": head_dim must be even for rotary embeddings", "head_dim");
  }
  if (!c.rope_scaling.is_null()) {
    std::string type = c.rope_scaling.value("rope_type", c.rope_scaling.value("type", ""));
    if (type != "llama3" && type != "linear" && type != "yarn" && type != "default") {
      throw Error(Code::kUnimplemented,
                  where + ": rope_scaling type \"" + type +
                      "\" is not supported (supported: default, linear, llama3, yarn)",
                  "rope_scaling");
    }
    const double partial = c.rope_scaling.value("partial_rotary_factor", 1.0);
    if (partial != 1.0) {
      throw Error(Code::kUnimplemented,
                  where + ": partial_rotary_factor " + Json(partial).dump() +
                      " is not supported (rotary over the whole head)",
                  "partial_rotary_factor");
    }
  }
  return c;
}

Json LlamaConfig::ToJson() const {
  Json j = raw.is_object() ? raw : Json::object();
  j["architectures"] = {Architecture()};
  j["model_type"] = model_type;
  j["vocab_size"] = vocab_size;
  j["hidden_size"] = hidden_size;
  j["intermediate_size"] = intermediate_size;
  j["num_hidden_layers"] = num_hidden_layers;
  j["num_attention_heads"] = num_attention_heads;
  j["num_key_value_heads"] = num_key_value_heads;
  j["head_dim"] = head_dim;
  j["max_position_embeddings"] = max_position_embeddings;
  j["rms_norm_eps"] = rms_norm_eps;
  j["rope_theta"] = rope_theta;
  j["tie_word_embeddings"] = tie_word_embeddings;
  if (model_type == "llama" || model_type == "qwen3" || model_type == "qwen3_moe" || gemma)
    j["attention_bias"] = attention_bias;
  if (model_type == "qwen3_moe") {
    j["num_experts"] = num_experts;
    j["num_experts_per_tok"] = num_experts_per_tok;
    j["moe_intermediate_size"] = moe_intermediate_size;
    j["norm_topk_prob"] = norm_topk_prob;
    j["decoder_sparse_step"] = decoder_sparse_step;
    j["mlp_only_layers"] = mlp_only_layers;
  } else if (model_type == "mixtral") {
    j["num_local_experts"] = num_experts;
    j["num_experts_per_tok"] = num_experts_per_tok;
  }
  if (model_type == "llama") j["mlp_bias"] = mlp_bias;
  if (gemma) {
    j.erase("hidden_act");
    j["hidden_activation"] = "gelu_pytorch_tanh";
    // transformers' config class takes an integer here.
    if (query_pre_attn_scalar == std::floor(query_pre_attn_scalar)) {
      j["query_pre_attn_scalar"] = static_cast<int64_t>(query_pre_attn_scalar);
    } else {
      j["query_pre_attn_scalar"] = query_pre_attn_scalar;
    }
    j["rope_local_base_freq"] = local_rope_theta;
    Json types = Json::array();
    for (bool sliding : sliding_layers) types.push_back(sliding ? "sliding_attention" : "full_attention");
    j["layer_types"] = types;
    if (attention_window > 0) j["sliding_window"] = attention_window;
    j.erase("rope_parameters");  // rope_theta, rope_local_base_freq and rope_scaling say it
  } else {
    j["hidden_act"] = "silu";
  }
  j["torch_dtype"] = torch_dtype;
  j["rope_scaling"] = rope_scaling;
  if (bos_token_id) j["bos_token_id"] = *bos_token_id;
  if (eos_token_ids.size() == 1) j["eos_token_id"] = eos_token_ids[0];
  if (eos_token_ids.size() > 1) j["eos_token_id"] = eos_token_ids;
  return j;
}

int64_t LlamaConfig::NumParameters() const {
  int64_t q = num_attention_heads * head_dim, kv = num_key_value_heads * head_dim;
  int64_t attn = hidden_size * q * 2 + hidden_size * kv * 2 + (HasQkvBias() ? q + 2 * kv : 0) +
                 (attention_bias ? hidden_size : 0) + (qk_norm ? 2 * head_dim : 0);
  const int64_t dense = 3 * hidden_size * intermediate_size;
  const int64_t sparse = num_experts * (3 * hidden_size * moe_intermediate_size + hidden_size);  // + router
  int64_t layers = 0;
  const int64_t norms = (gemma ? 4 : 2) * hidden_size;  // Gemma: around the attention and the MLP
  for (int64_t i = 0; i < num_hidden_layers; ++i) layers += attn + (IsMoeLayer(i) ? sparse : dense) + norms;
  const int64_t emb = vocab_size * hidden_size;
  return layers + hidden_size + emb * (tie_word_embeddings ? 1 : 2);
}

LlamaConfig LoadConfig(const std::filesystem::path& model_dir) {
  const std::filesystem::path path = model_dir / "config.json";
  if (!std::filesystem::exists(model_dir)) {
    throw Error(Code::kNotFound, "model folder " + model_dir.string() + " does not exist",
                model_dir.string());
  }
  return LlamaConfig::FromJson(ParseJson(ReadFile(path), path.string()), path.string());
}

}  // namespace burst
