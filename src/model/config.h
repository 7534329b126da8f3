// LlamaConfig: the Hugging Face `config.json` of a LlamaForCausalLM, as Burst
// reads and writes it.
//
// Only the fields the architecture needs are interpreted; the whole original
// JSON is kept in `raw` so that writing a folder back preserves fields Burst
// does not use. Validation names the file and the field.
//
// Thread-safety: a value type.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "core/json.h"

namespace burst {

struct LlamaConfig {
  int64_t vocab_size = 0;
  int64_t hidden_size = 0;
  int64_t intermediate_size = 0;
  int64_t num_hidden_layers = 0;
  int64_t num_attention_heads = 0;
  int64_t num_key_value_heads = 0;
  int64_t head_dim = 0;
  int64_t max_position_embeddings = 2048;
  double rms_norm_eps = 1e-6;
  double rope_theta = 10000.0;
  bool tie_word_embeddings = false;
  bool attention_bias = false;
  bool mlp_bias = false;
  // rope_scaling: null, or {"rope_type": "llama3"|"linear", ...}.
  Json rope_scaling;
  std::string torch_dtype = "float32";
  std::optional<int64_t> bos_token_id;
  std::vector<int64_t> eos_token_ids;
  Json raw = Json::object();

  // `where` names the file in errors.
  static LlamaConfig FromJson(const Json& j, const std::string& where);
  // The config.json to write: `raw` with Burst's fields updated.
  Json ToJson() const;
  int64_t NumParameters() const;
};

// The config.json of a Hugging Face model folder; throws naming the folder
// when it is missing, the file when it does not parse.
LlamaConfig LoadConfig(const std::filesystem::path& model_dir);

}  // namespace burst
