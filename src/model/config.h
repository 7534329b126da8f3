// LlamaConfig: the Hugging Face `config.json` of a decoder of the Llama
// kind, as Burst reads and writes it: Llama, Mistral, Qwen 2 (2.5), Qwen 3
// and the sparse mixtures of experts Qwen 3 MoE and Mixtral ("model_type"
// names the family; what sets them apart is a field here, read by the one
// forward in llama.cpp).
//
// A config Burst cannot run exactly is refused naming the field and its
// value (an activation other than SiLU, an MLP bias, an unknown rope
// scaling), never run approximately; a sliding attention window is kept
// and every forward longer than it is refused (attention_window).
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
  // The family: "llama", "mistral", "qwen2", "qwen3", "qwen3_moe", "mixtral"
  // or "gemma3_text".
  std::string model_type = "llama";
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
  bool attention_bias = false;  // q, k, v and o have biases (llama, qwen3: config "attention_bias")
  bool qkv_bias = false;        // q, k and v have biases, o none (qwen2)
  bool qk_norm = false;         // RMSNorm over each head of q and k before rotary (qwen3)
  bool mlp_bias = false;        // refused when true (no family Burst runs has one)
  // The shortest sliding window of any layer (0: every layer attends to
  // every earlier key). Burst attends in full, which is exact for sequences
  // no longer than the window; a forward over more keys is refused.
  int64_t attention_window = 0;
  // Gemma 3 (gemma3_text): norms scale by (1 + w) and four a layer (around
  // the attention and the MLP, each output normed too), q and k normed per
  // head, the embedding scaled by sqrt(hidden_size), attention by
  // query_pre_attn_scalar^-1/2, a GELU (tanh) MLP, and the sliding layers
  // (sliding_layers) rotating with their own base (local_rope_theta,
  // unscaled). The windows themselves: attention_window.
  bool gemma = false;
  double query_pre_attn_scalar = 0.0;  // 0: head_dim
  double local_rope_theta = 0.0;
  std::vector<bool> sliding_layers;  // per layer; empty: none slide
  // Sparse mixture of experts (qwen3_moe, mixtral): the MLP of a MoE layer
  // (IsMoeLayer) is num_experts SwiGLU experts of moe_intermediate_size, a
  // router picking num_experts_per_tok of them per token (softmax, top k,
  // renormalised when norm_topk_prob), their outputs summed by weight.
  int64_t num_experts = 0;
  int64_t num_experts_per_tok = 0;
  int64_t moe_intermediate_size = 0;
  bool norm_topk_prob = false;
  int64_t decoder_sparse_step = 1;
  std::vector<int64_t> mlp_only_layers;  // dense layers among the sparse ones
  // rope_scaling: null, or {"rope_type": "llama3"|"linear", ...}.
  Json rope_scaling;
  std::string torch_dtype = "float32";
  std::optional<int64_t> bos_token_id;
  std::vector<int64_t> eos_token_ids;
  Json raw = Json::object();

  // Whether q, k, v (and o) carry biases.
  bool HasQkvBias() const { return attention_bias || qkv_bias; }
  // Whether layer `i`'s MLP is a mixture of experts (as transformers decides).
  bool IsMoeLayer(int64_t i) const;
  // The Hugging Face name of a MoE layer's weight: the router's (expert -1)
  // or expert `expert`'s `proj` ("gate", "up" or "down"): qwen3_moe's
  // "model.layers.0.mlp.experts.3.up_proj.weight", Mixtral's
  // "model.layers.0.block_sparse_moe.experts.3.w3.weight".
  std::string ExpertWeightName(int64_t layer, int64_t expert, const std::string& proj = "") const;
  // The class transformers loads the folder with ("Qwen3ForCausalLM").
  std::string Architecture() const;

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
