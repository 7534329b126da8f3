// Model presets for `burst init-model`: named Llama shapes.
//
// Thread-safety: stateless. Errors: throw burst::Error for unknown names.
#pragma once

#include <string>
#include <vector>

#include "model/config.h"

namespace burst {

struct Preset {
  std::string name;
  std::string description;
  LlamaConfig config;  // vocab_size 0: taken from the tokenizer
};

const std::vector<Preset>& Presets();
// The preset's config with vocab_size set (from the tokenizer, or the preset's own).
LlamaConfig PresetConfig(const std::string& name, int64_t vocab_size);

}  // namespace burst
