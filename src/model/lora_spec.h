// LoraSpec: which projections a LoRA adapter covers, its rank and scale.
//
// Kept apart from llama.h so that code reading recipes and job requests (the
// control plane, the fuzz targets) does not compile or link libtorch.
//
// Thread-safety: a value type. Errors: NormalizeLoraTarget throws
// burst::Error (kInvalidArgument) naming the parameter.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"
#include "model/config.h"

namespace burst {

// The seven projections LoRA can adapt, by their Hugging Face module names,
// and the LM head ("lm_head": Tinker's train_unembed; PEFT's module name).
extern const std::vector<std::string> kLoraTargetNames;

struct LoraSpec {
  int64_t rank = 8;
  double alpha = 16.0;
  double dropout = 0.0;
  // Module names ("q_proj", ..., "lm_head"), normalised; "q" is accepted on
  // input. The default leaves the LM head out.
  std::vector<std::string> targets = {"q_proj",    "k_proj",  "v_proj",   "o_proj",
                                      "gate_proj", "up_proj", "down_proj"};
  double scale() const { return alpha / static_cast<double>(rank); }
};

// Turns "q" or "q_proj" into "q_proj"; throws naming `param` if unknown.
std::string NormalizeLoraTarget(const std::string& name, const std::string& param);

// LoRA on a mixture of experts' MLP, as PEFT adapts it: gate_proj and
// up_proj are one fused weight there (both or neither), and dropout cannot
// apply to a weight's delta. kInvalidArgument / kUnimplemented naming
// `field`; ok for a dense model or LoRA on the attention only.
Status CheckExpertLora(const LlamaConfig& config, const LoraSpec& spec, const std::string& field);

}  // namespace burst
