#include "model/gguf_export.h"

#include <cmath>
#include <map>
#include <optional>
#include <regex>

#include "core/fs.h"
#include "core/json.h"
#include "core/status.h"
#include "model/sp_model_proto.h"
#include "model/tokenizer.h"

namespace burst {
namespace {

namespace fs = std::filesystem;
using gguf::TensorType;

// The pre-tokenizer regexes llama.cpp knows by name (its
// tokenizer.ggml.pre), as their tokenizer.json files write them.
const char* const kLlama3Split =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
const char* const kQwen2Split =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

// Hugging Face's name of a weight -> llama.cpp's. Gemma's four norms a
// layer: post_attention_layernorm is its attention's post-norm there.
std::string GgufName(const std::string& hf, bool gemma) {
  static const std::map<std::string, std::string> gemma_norms = {
      {"post_attention_layernorm", "post_attention_norm"},
      {"pre_feedforward_layernorm", "ffn_norm"},
      {"post_feedforward_layernorm", "post_ffw_norm"}};
  static const std::map<std::string, std::string> layer = {{"input_layernorm", "attn_norm"},
                                                           {"self_attn.q_proj", "attn_q"},
                                                           {"self_attn.k_proj", "attn_k"},
                                                           {"self_attn.v_proj", "attn_v"},
                                                           {"self_attn.o_proj", "attn_output"},
                                                           {"post_attention_layernorm", "ffn_norm"},
                                                           {"mlp.gate_proj", "ffn_gate"},
                                                           {"mlp.up_proj", "ffn_up"},
                                                           {"mlp.down_proj", "ffn_down"},
                                                           {"self_attn.q_norm", "attn_q_norm"},
                                                           {"self_attn.k_norm", "attn_k_norm"},
                                                           {"mlp.gate", "ffn_gate_inp"},
                                                           {"block_sparse_moe.gate", "ffn_gate_inp"}};
  if (hf == "model.embed_tokens.weight") return "token_embd.weight";
  if (hf == "model.norm.weight") return "output_norm.weight";
  if (hf == "lm_head.weight") return "output.weight";
  static const std::regex pattern(R"(model\.layers\.(\d+)\.(.+)\.(weight|bias))");
  std::smatch m;
  if (std::regex_match(hf, m, pattern)) {
    if (gemma) {
      if (auto g = gemma_norms.find(m[2].str()); g != gemma_norms.end())
        return "blk." + m[1].str() + "." + g->second + "." + m[3].str();
    }
    auto it = layer.find(m[2].str());
    if (it != layer.end()) return "blk." + m[1].str() + "." + it->second + "." + m[3].str();
  }
  throw Error(Code::kInvalidArgument, "no GGUF name for the weight " + hf, hf);
}

// convert_hf_to_gguf.py's LlamaModel.permute: HF's rotary halves ->
// ggml's interleaved pairs, per head, on the rows (a weight) or values (a bias).
torch::Tensor PermuteRotary(const torch::Tensor& t, int64_t heads) {
  std::vector<int64_t> shape(t.sizes().begin(), t.sizes().end());
  std::vector<int64_t> split = {heads, 2, shape[0] / heads / 2};
  split.insert(split.end(), shape.begin() + 1, shape.end());
  return t.reshape(split).swapaxes(1, 2).reshape(shape).contiguous();
}

void SetTokenizer(gguf::Writer& g, const LlamaConfig& c, const fs::path& dir) {
  auto tok = LoadTokenizer(dir);  // the checks Burst trains with, and bos/eos/chat template
  std::vector<std::string> tokens;
  std::vector<int32_t> types;
  if (fs::exists(dir / "tokenizer.model")) {
    const fs::path file = dir / "tokenizer.model";
    sp::ModelProto proto = sp::ParseModel(ReadFile(file), file.string());
    std::vector<float> scores;
    for (const sp::PieceProto& p : proto.pieces) {
      tokens.push_back(p.piece);
      scores.push_back(p.score);
      // llama.cpp's token types are SentencePiece's; a user-defined piece is
      // special to Burst (the chat template's markers: matched only where
      // special tokens are allowed), which is llama.cpp's control type.
      types.push_back(
          static_cast<int32_t>(p.type == sp::PieceType::kUserDefined ? sp::PieceType::kControl : p.type));
    }
    if (static_cast<int64_t>(tokens.size()) > c.vocab_size) {
      throw Error(Code::kInvalidArgument,
                  file.string() + ": " + std::to_string(tokens.size()) +
                      " pieces, more than the model's vocab_size " + std::to_string(c.vocab_size),
                  "vocab_size");
    }
    // Rows of the embedding no piece names (a vocabulary padded for speed).
    while (static_cast<int64_t>(tokens.size()) < c.vocab_size) {
      tokens.push_back("[PAD" + std::to_string(tokens.size()) + "]");
      scores.push_back(0.0f);
      types.push_back(5);  // unused
    }
    g.Set("tokenizer.ggml.model", std::string("llama"));
    g.Set("tokenizer.ggml.tokens", tokens);
    g.Set("tokenizer.ggml.scores", scores);
    for (size_t i = 0; i < proto.pieces.size(); ++i) {
      if (proto.pieces[i].type == sp::PieceType::kUnknown)
        g.Set("tokenizer.ggml.unknown_token_id", uint32_t(i));
    }
  } else {
    const fs::path file = dir / "tokenizer.json";
    const Json j = ParseJson(ReadFile(file), file.string());
    const Json& pre = j.value("pre_tokenizer", Json());
    std::string pre_name;
    if (pre.value("type", "") == "ByteLevel" && pre.value("use_regex", true)) {
      pre_name = "gpt-2";
    } else if (pre.value("type", "") == "Sequence" && pre.contains("pretokenizers") &&
               pre["pretokenizers"].size() == 2 && pre["pretokenizers"][0].value("type", "") == "Split" &&
               pre["pretokenizers"][1].value("type", "") == "ByteLevel") {
      const std::string regex = pre["pretokenizers"][0].value("pattern", Json::object()).value("Regex", "");
      if (regex == kLlama3Split) pre_name = "llama-bpe";
      if (regex == kQwen2Split) pre_name = "qwen2";
    }
    if (pre_name.empty()) {
      throw Error(Code::kInvalidArgument,
                  file.string() +
                      ": llama.cpp has no name for this pre_tokenizer (known: GPT-2's ByteLevel, "
                      "Llama 3's and Qwen 2's Split): " +
                      pre.dump().substr(0, 300),
                  "pre_tokenizer");
    }
    tokens.assign(static_cast<size_t>(c.vocab_size), "");
    types.assign(static_cast<size_t>(c.vocab_size), 1);  // normal
    auto place = [&](int64_t id, const std::string& text, int32_t type) {
      if (id < 0 || id >= c.vocab_size) {
        throw Error(Code::kInvalidArgument,
                    file.string() + ": token id " + std::to_string(id) +
                        " is beyond the model's vocab_size " + std::to_string(c.vocab_size),
                    "vocab");
      }
      tokens[id] = text;
      types[id] = type;
    };
    for (const auto& [text, id] : j["model"]["vocab"].items()) place(id.get<int64_t>(), text, 1);
    for (const Json& a : j.value("added_tokens", Json::array())) {
      place(a["id"].get<int64_t>(), a["content"].get<std::string>(), a.value("special", false) ? 3 : 4);
    }
    // Rows of the embedding no token names (a vocabulary padded for speed).
    for (size_t i = 0; i < tokens.size(); ++i) {
      if (tokens[i].empty()) tokens[i] = "[PAD" + std::to_string(i) + "]", types[i] = 5;  // unused
    }
    std::vector<std::string> merges;
    for (const Json& m : j["model"].value("merges", Json::array())) {
      merges.push_back(m.is_string() ? m.get<std::string>()
                                     : m[0].get<std::string>() + " " + m[1].get<std::string>());
    }
    g.Set("tokenizer.ggml.model", std::string("gpt2"));
    g.Set("tokenizer.ggml.pre", pre_name);
    g.Set("tokenizer.ggml.tokens", tokens);
    g.Set("tokenizer.ggml.merges", merges);
  }
  g.Set("tokenizer.ggml.token_type", types);
  if (tok->bos_id) g.Set("tokenizer.ggml.bos_token_id", uint32_t(*tok->bos_id));
  if (tok->eos_id) g.Set("tokenizer.ggml.eos_token_id", uint32_t(*tok->eos_id));
  if (tok->pad_id) g.Set("tokenizer.ggml.padding_token_id", uint32_t(*tok->pad_id));
  // Burst puts bos first in every sequence it trains on, when the tokenizer has one.
  g.Set("tokenizer.ggml.add_bos_token", tok->bos_id.has_value());
  g.Set("tokenizer.ggml.add_eos_token", false);
  if (!tok->chat_template.empty()) g.Set("tokenizer.chat_template", tok->chat_template);
}

// llama.cpp's per-frequency divisors for Llama 3.1's rope_scaling
// (convert_hf_to_gguf.py's rope_freqs), in the order of the frequencies.
std::vector<float> Llama3RopeFactors(const LlamaConfig& c) {
  const Json& rs = c.rope_scaling;
  const double factor = rs.value("factor", 8.0), low = rs.value("low_freq_factor", 1.0),
               high = rs.value("high_freq_factor", 4.0),
               old_len = rs.value("original_max_position_embeddings", 8192.0);
  std::vector<float> out;
  for (int64_t i = 0; i < c.head_dim; i += 2) {
    const double freq = 1.0 / std::pow(c.rope_theta, static_cast<double>(static_cast<float>(i) / c.head_dim));
    const double wavelen = 2 * M_PI / freq;
    if (wavelen < old_len / high) {
      out.push_back(1.0f);
    } else if (wavelen > old_len / low) {
      out.push_back(static_cast<float>(factor));
    } else {
      const double smooth = (old_len / wavelen - low) / (high - low);
      out.push_back(static_cast<float>(1.0 / ((1 - smooth) / factor + smooth)));
    }
  }
  return out;
}

// llama.cpp's architecture for a family, as convert_hf_to_gguf.py names it
// (Mistral and Mixtral are Llamas there); what llama.cpp would compute
// otherwise than transformers is refused by field.
std::string GgufArchitecture(const LlamaConfig& c) {
  const std::string& t = c.model_type;
  auto refuse = [&](const std::string& field, const std::string& why) {
    throw Error(Code::kUnimplemented, "GGUF export of this " + t + " model: " + field + ": " + why, field);
  };
  if (t == "llama" || t == "mistral" || t == "mixtral") return "llama";
  if (t == "qwen2" || t == "qwen3") return t;
  if (t == "qwen3_moe") {
    if (!c.norm_topk_prob)
      refuse("norm_topk_prob", "llama.cpp's qwen3moe always renormalises the top-k weights");
    if (c.decoder_sparse_step != 1 || !c.mlp_only_layers.empty())
      refuse("mlp_only_layers", "llama.cpp's qwen3moe has experts in every layer");
    return "qwen3moe";
  }
  if (t == "gemma3_text") {
    // llama.cpp's gemma3: every sixth layer global, the others sliding with
    // rope base 10000, queries scaled by head_dim^-1/2.
    for (int64_t i = 0; i < c.num_hidden_layers; ++i) {
      const bool sliding = !c.sliding_layers.empty() && c.sliding_layers[static_cast<size_t>(i)];
      if (sliding != (i % 6 != 5)) refuse("layer_types", "llama.cpp slides every layer but each sixth");
    }
    if (c.local_rope_theta != 10000.0)
      refuse("rope_local_base_freq", "llama.cpp's sliding layers rotate with base 10000");
    if (c.query_pre_attn_scalar != 0.0 && c.query_pre_attn_scalar != static_cast<double>(c.head_dim))
      refuse("query_pre_attn_scalar", "llama.cpp scales queries by head_dim");
    return "gemma3";
  }
  throw Error(
      Code::kUnimplemented,
      "GGUF export of " + t +
          " models is not supported (llama, mistral, mixtral, qwen2, qwen3, qwen3_moe and gemma3_text are)",
      "model_type");
}

}  // namespace

gguf::TensorType ParseGgufType(const std::string& name) {
  if (name == "f32") return TensorType::kF32;
  if (name == "f16") return TensorType::kF16;
  if (name == "q8_0") return TensorType::kQ8_0;
  throw Error(Code::kInvalidArgument, "gguf type \"" + name + "\": use f32, f16 or q8_0", "gguf-type");
}

std::string ExportGguf(const LlamaModel& model, const fs::path& tokenizer_dir, const fs::path& out,
                       const GgufExportOptions& options) {
  if (model.lora)
    throw Error(Code::kInternal, "ExportGguf needs merged weights; merge the LoRA adapter first");
  const LlamaConfig& c = model.config;
  const std::string arch = GgufArchitecture(c);
  const bool llama = arch == "llama", gemma = arch == "gemma3";
  gguf::Writer g;
  g.Set("general.architecture", arch);
  g.Set("general.name", options.name);
  g.Set("general.file_type", uint32_t(options.type == TensorType::kF32   ? 0
                                      : options.type == TensorType::kF16 ? 1
                                                                         : 7));
  g.Set("general.quantization_version", uint32_t{2});
  g.Set(arch + ".vocab_size", uint32_t(c.vocab_size));
  g.Set(arch + ".context_length", uint32_t(c.max_position_embeddings));
  g.Set(arch + ".embedding_length", uint32_t(c.hidden_size));
  g.Set(arch + ".block_count", uint32_t(c.num_hidden_layers));
  g.Set(arch + ".feed_forward_length", uint32_t(c.intermediate_size));
  g.Set(arch + ".rope.dimension_count", uint32_t(c.head_dim));
  g.Set(arch + ".attention.head_count", uint32_t(c.num_attention_heads));
  g.Set(arch + ".attention.head_count_kv", uint32_t(c.num_key_value_heads));
  if (c.head_dim * c.num_attention_heads != c.hidden_size) {
    g.Set(arch + ".attention.key_length", uint32_t(c.head_dim));
    g.Set(arch + ".attention.value_length", uint32_t(c.head_dim));
  }
  g.Set(arch + ".attention.layer_norm_rms_epsilon", float(c.rms_norm_eps));
  g.Set(arch + ".rope.freq_base", float(c.rope_theta));
  if (c.num_experts > 0) {
    g.Set(arch + ".expert_count", uint32_t(c.num_experts));
    g.Set(arch + ".expert_used_count", uint32_t(c.num_experts_per_tok));
    if (arch == "qwen3moe") g.Set(arch + ".expert_feed_forward_length", uint32_t(c.moe_intermediate_size));
  }
  if (gemma) g.Set(arch + ".attention.sliding_window", uint32_t(c.attention_window));

  std::vector<float> rope_factors;
  if (c.rope_scaling.is_object()) {
    const std::string type = c.rope_scaling.value("rope_type", c.rope_scaling.value("type", std::string()));
    if (type == "linear") {
      g.Set(arch + ".rope.scaling.type", std::string("linear"));
      g.Set(arch + ".rope.scaling.factor", float(c.rope_scaling.value("factor", 1.0)));
    } else if (type == "llama3" && llama) {
      rope_factors = Llama3RopeFactors(c);
    } else if (type != "default") {
      throw Error(Code::kInvalidArgument, "rope_scaling type \"" + type + "\" has no GGUF form here",
                  "rope_scaling");
    }
  }
  SetTokenizer(g, c, tokenizer_dir);

  // The tensors stay alive (float32, contiguous) until the file is written.
  std::vector<torch::Tensor> keep;
  auto add = [&](const std::string& name, torch::Tensor t) {
    t = t.detach().to(torch::kCPU, torch::kFloat32).contiguous();
    keep.push_back(t);
    TensorType type = t.dim() == 1 ? TensorType::kF32 : options.type;
    // As llama.cpp's converter: a row q8_0 cannot hold is kept in f16.
    if (type == TensorType::kQ8_0 && t.size(-1) % gguf::kQ8Block != 0) type = TensorType::kF16;
    std::vector<int64_t> shape(t.sizes().begin(), t.sizes().end());
    if (Status s = g.AddTensor({name, shape, t.data_ptr<float>(), type}); !s.ok()) throw Error(s);
  };
  if (!rope_factors.empty()) {
    add("rope_freqs.weight", torch::tensor(rope_factors, torch::kFloat32));
  }
  torch::NoGradGuard no_grad;
  for (const auto& [hf, t] : model.BaseWeights()) {
    if (hf.find(".experts.") != std::string::npos) continue;  // stacked below
    const std::string name = GgufName(hf, gemma);
    const bool q = llama && hf.find(".q_proj.") != std::string::npos,
               k = llama && hf.find(".k_proj.") != std::string::npos;
    // convert_hf_to_gguf.py stores Gemma's norms as the (1 + w) they scale by.
    const bool shifted = gemma && hf.size() > 11 && hf.compare(hf.size() - 11, 11, "norm.weight") == 0;
    add(name, q         ? PermuteRotary(t, c.num_attention_heads)
              : k       ? PermuteRotary(t, c.num_key_value_heads)
              : shifted ? t + 1.0
                        : t);
  }
  // A mixture of experts' weights, each projection's experts stacked (E, rows, cols).
  for (int64_t i = 0; i < c.num_hidden_layers; ++i) {
    if (!c.IsMoeLayer(i)) continue;
    const LlamaLayer& l = model.layers[static_cast<size_t>(i)];
    const std::string p = "blk." + std::to_string(i) + ".";
    add(p + "ffn_gate_exps.weight", torch::stack(l.expert_gate));
    add(p + "ffn_up_exps.weight", torch::stack(l.expert_up));
    add(p + "ffn_down_exps.weight", torch::stack(l.expert_down));
  }
  if (Status s = g.Write(out); !s.ok()) throw Error(s);
  const char* type = options.type == TensorType::kF32   ? "f32"
                     : options.type == TensorType::kF16 ? "f16"
                                                        : "q8_0";
  return "wrote " + out.string() + " (GGUF, " + type + ", " + std::to_string(g.tensor_count()) +
         " tensors, " + std::to_string(fs::file_size(out)) + " bytes)";
}

}  // namespace burst
