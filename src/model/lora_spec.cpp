#include "model/lora_spec.h"

#include <algorithm>

#include "core/status.h"

namespace burst {

const std::vector<std::string> kLoraTargetNames = {"q_proj",    "k_proj",  "v_proj",    "o_proj",
                                                   "gate_proj", "up_proj", "down_proj", "lm_head"};

std::string NormalizeLoraTarget(const std::string& name, const std::string& param) {
  for (const auto& t : kLoraTargetNames) {
    if (name == t || name + "_proj" == t) return t;
  }
  throw Error(Code::kInvalidArgument,
              "unknown LoRA target \"" + name +
                  "\" (targets: q, k, v, o, gate, up, down, or their _proj names, and lm_head)",
              param);
}

Status CheckExpertLora(const LlamaConfig& config, const LoraSpec& spec, const std::string& field) {
  if (config.num_experts <= 0) return Status();
  const auto has = [&](const char* t) {
    return std::find(spec.targets.begin(), spec.targets.end(), t) != spec.targets.end();
  };
  if (has("gate_proj") != has("up_proj")) {
    return Status(Code::kInvalidArgument,
                  field + ": gate_proj and up_proj are one fused weight in a mixture of experts (" +
                      config.model_type + ", as PEFT adapts it): target both or neither",
                  field);
  }
  if ((has("gate_proj") || has("down_proj")) && spec.dropout > 0.0) {
    return Status(
        Code::kUnimplemented,
        field + ": LoRA dropout on a mixture of experts' weights is not supported (PEFT refuses it too)",
        "lora.dropout");
  }
  return Status();
}

}  // namespace burst
