#include "model/presets.h"

#include "core/status.h"

namespace burst {
namespace {

LlamaConfig Make(int64_t hidden, int64_t layers, int64_t heads, int64_t kv_heads, int64_t ffn, bool tied,
                 int64_t vocab, int64_t context) {
  LlamaConfig c;
  c.vocab_size = vocab;
  c.hidden_size = hidden;
  c.num_hidden_layers = layers;
  c.num_attention_heads = heads;
  c.num_key_value_heads = kv_heads;
  c.head_dim = hidden / heads;
  c.intermediate_size = ffn;
  c.tie_word_embeddings = tied;
  c.max_position_embeddings = context;
  c.rms_norm_eps = 1e-5;
  c.rope_theta = 10000.0;
  c.raw = {{"model_type", "llama"}};
  return c;
}

// Llama 3's shapes: rope theta 500000 and its "llama3" long-context scaling.
LlamaConfig Llama3(int64_t hidden, int64_t layers, int64_t ffn, bool tied, double factor) {
  LlamaConfig c = Make(hidden, layers, 32, 8, ffn, tied, 128256, 131072);
  c.rope_theta = 500000.0;
  c.rope_scaling = {{"rope_type", "llama3"},
                    {"factor", factor},
                    {"low_freq_factor", 1.0},
                    {"high_freq_factor", 4.0},
                    {"original_max_position_embeddings", 8192}};
  return c;
}

}  // namespace

const std::vector<Preset>& Presets() {
  static const std::vector<Preset> presets = {
      {"tiny", "2 layers, 64 wide, GQA 4/2 heads, untied: for tests", Make(64, 2, 4, 2, 176, false, 0, 512)},
      {"tiny-tied", "2 layers, 64 wide, GQA 4/2 heads, tied embeddings: for tests",
       Make(64, 2, 4, 2, 176, true, 0, 512)},
      {"small", "4 layers, 256 wide, GQA 8/4 heads, tied: Burst's shipped base (~4M params)",
       Make(256, 4, 8, 4, 704, true, 0, 1024)},
      {"100m", "12 layers, 768 wide, GQA 12/4 heads, tied, vocab 32000: for benchmarks",
       Make(768, 12, 12, 4, 2048, true, 32000, 2048)},
      {"llama3.2-1b",
       "Llama 3.2 1B's shape (16 layers, 2048 wide, GQA 32/8, tied, vocab 128256): GPU benchmarks",
       Llama3(2048, 16, 8192, true, 32.0)},
      {"llama3.1-8b", "Llama 3.1 8B's shape (32 layers, 4096 wide, GQA 32/8, vocab 128256): GPU benchmarks",
       Llama3(4096, 32, 14336, false, 8.0)},
  };
  return presets;
}

LlamaConfig PresetConfig(const std::string& name, int64_t vocab_size) {
  for (const auto& p : Presets()) {
    if (p.name != name) continue;
    LlamaConfig c = p.config;
    if (vocab_size > 0) c.vocab_size = vocab_size;
    if (c.vocab_size <= 0) {
      throw Error(Code::kInvalidArgument,
                  "preset " + name + " takes its vocabulary from a tokenizer: pass --tokenizer", "tokenizer");
    }
    return c;
  }
  std::string names;
  for (const auto& p : Presets()) names += (names.empty() ? "" : ", ") + p.name;
  throw Error(Code::kInvalidArgument, "unknown preset \"" + name + "\" (presets: " + names + ")", "preset");
}

}  // namespace burst
