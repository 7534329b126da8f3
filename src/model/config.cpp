#include "model/config.h"

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

}  // namespace

LlamaConfig LlamaConfig::FromJson(const Json& j, const std::string& where) {
  if (!j.is_object()) throw Error(Code::kInvalidArgument, where + ": not a JSON object", where);
  LlamaConfig c;
  c.raw = j;
  std::string model_type = Optional<std::string>(j, "model_type", "llama", where);
  if (model_type != "llama" && model_type != "mistral") {
    throw Error(Code::kUnimplemented,
                where + ": model_type \"" + model_type +
                    "\" is not supported (Burst runs the Llama architecture: llama, mistral)",
                "model_type");
  }
  c.vocab_size = RequireInt(j, "vocab_size", where);
  c.hidden_size = RequireInt(j, "hidden_size", where);
  c.intermediate_size = RequireInt(j, "intermediate_size", where);
  c.num_hidden_layers = RequireInt(j, "num_hidden_layers", where);
  c.num_attention_heads = RequireInt(j, "num_attention_heads", where);
  c.num_key_value_heads = Optional<int64_t>(j, "num_key_value_heads", c.num_attention_heads, where);
  c.head_dim = Optional<int64_t>(j, "head_dim", c.hidden_size / c.num_attention_heads, where);
  c.max_position_embeddings = Optional<int64_t>(j, "max_position_embeddings", 2048, where);
  c.rms_norm_eps = Optional<double>(j, "rms_norm_eps", 1e-6, where);
  c.rope_theta = Optional<double>(j, "rope_theta", 10000.0, where);
  c.tie_word_embeddings = Optional<bool>(j, "tie_word_embeddings", false, where);
  c.attention_bias = Optional<bool>(j, "attention_bias", false, where);
  c.mlp_bias = Optional<bool>(j, "mlp_bias", false, where);
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
    if (type != "llama3" && type != "linear" && type != "default") {
      throw Error(Code::kUnimplemented,
                  where + ": rope_scaling type \"" + type +
                      "\" is not supported (supported: default, linear, llama3)",
                  "rope_scaling");
    }
  }
  return c;
}

Json LlamaConfig::ToJson() const {
  Json j = raw.is_object() ? raw : Json::object();
  j["architectures"] = {"LlamaForCausalLM"};
  j["model_type"] = raw.value("model_type", "llama");
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
  j["attention_bias"] = attention_bias;
  j["mlp_bias"] = mlp_bias;
  j["hidden_act"] = "silu";
  j["torch_dtype"] = torch_dtype;
  j["rope_scaling"] = rope_scaling;
  if (bos_token_id) j["bos_token_id"] = *bos_token_id;
  if (eos_token_ids.size() == 1) j["eos_token_id"] = eos_token_ids[0];
  if (eos_token_ids.size() > 1) j["eos_token_id"] = eos_token_ids;
  return j;
}

int64_t LlamaConfig::NumParameters() const {
  int64_t q = num_attention_heads * head_dim, kv = num_key_value_heads * head_dim;
  int64_t attn = hidden_size * q * 2 + hidden_size * kv * 2;
  int64_t mlp = 3 * hidden_size * intermediate_size;
  int64_t layer = attn + mlp + 2 * hidden_size;
  int64_t emb = vocab_size * hidden_size;
  return num_hidden_layers * layer + hidden_size + emb * (tie_word_embeddings ? 1 : 2);
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
