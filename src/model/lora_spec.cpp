#include "model/lora_spec.h"

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

}  // namespace burst
