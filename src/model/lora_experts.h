// A mixture of experts' LoRA in PEFT's adapter files (transformers 5 holds
// the experts as fused 3-D weights, which PEFT adapts through
// `target_parameters`): which of "mlp.experts.gate_up_proj" and
// "mlp.experts.down_proj" an adapter covers, gate_up's rank and alpha
// (PEFT doubles both when it fuses gate_proj and up_proj targets:
// `rank_pattern` / `alpha_pattern` ".*\.gate_up_proj"), and the tensors'
// names (the two ParamWrappers nested, gate_up inside: its keys go through
// `base_layer` when down is adapted too). Used by hf_io.cpp.
#pragma once

#include <map>
#include <string>

#include "core/json.h"
#include "model/llama.h"
#include "model/safetensors.h"

namespace burst {

struct ExpertAdapter {
  bool gate_up = false, down = false;
  int64_t gate_up_rank = 0;  // per expert
};

// What adapter_config.json `cfg` asks of the experts (nothing for an
// adapter without target_parameters). kUnimplemented naming the field for
// anything else: other parameters, patterns on other modules, a gate_up
// scale (alpha / rank) other than the adapter's, a model without experts,
// or transformers 4's per-expert modules in target_modules.
ExpertAdapter ReadExpertAdapterConfig(const Json& cfg, const LlamaConfig& config, const LoraSpec& spec,
                                      const std::string& where);
// The key prefix of layer `layer`'s expert pair `which` ("gate_up", "down").
std::string ExpertLoraPath(size_t layer, const std::string& which, bool both);
// Each MoE layer's pairs from `weights`, shapes checked (names in *used);
// kInvalidArgument naming the tensor when one is missing or misshapen.
std::vector<std::map<std::string, LoraPair>> TakeExpertPairs(const LlamaModel& model, const ExpertAdapter& a,
                                                             int64_t rank, const TensorMap& weights,
                                                             const std::string& file,
                                                             std::set<std::string>* used);
// The adapter_config.json fields of a model's expert LoRA (none without).
void WriteExpertAdapterConfig(const LlamaModel& model, Json& cfg);

}  // namespace burst
