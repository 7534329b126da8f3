// LoRA pairs on the Llama projections: creation, PEFT naming, merging.
#include <cmath>

#include "core/status.h"
#include "model/llama.h"

namespace burst {
namespace {

const std::string kHeadTarget = "lm_head";

// The base weight a target adapts, and the PEFT module path of it.
torch::Tensor& TargetWeight(LlamaLayer& l, const std::string& target) {
  if (target == "q_proj") return l.q_proj;
  if (target == "k_proj") return l.k_proj;
  if (target == "v_proj") return l.v_proj;
  if (target == "o_proj") return l.o_proj;
  if (target == "gate_proj") return l.gate_proj;
  if (target == "up_proj") return l.up_proj;
  return l.down_proj;
}

std::string ModulePath(size_t layer, const std::string& target) {
  bool attn = target == "q_proj" || target == "k_proj" || target == "v_proj" || target == "o_proj";
  return "base_model.model.model.layers." + std::to_string(layer) + (attn ? ".self_attn." : ".mlp.") + target;
}

}  // namespace

void RequireDenseMlpTargets(const LlamaConfig& config, const std::vector<std::string>& targets,
                            const std::string& field) {
  if (config.num_experts <= 0) return;
  for (const std::string& t : targets) {
    if (t == "gate_proj" || t == "up_proj" || t == "down_proj") {
      throw Error(Code::kUnimplemented,
                  field + ": " + t + " on a mixture-of-experts model (" + config.model_type +
                      ") is not supported yet: PEFT adapts its experts' weights, which Burst does not yet; "
                      "adapt the attention (q_proj, k_proj, v_proj, o_proj)",
                  field);
    }
  }
}

std::vector<std::pair<std::string, torch::Tensor*>> LlamaModel::LoraWeightSlots() {
  std::vector<std::pair<std::string, torch::Tensor*>> slots;
  if (!lora) return slots;
  for (size_t i = 0; i < layers.size(); ++i) {
    for (const auto& target : lora->targets) {
      if (target == kHeadTarget) continue;
      auto it = layers[i].lora.find(target);
      if (it == layers[i].lora.end()) continue;
      std::string p = ModulePath(i, target);
      slots.emplace_back(p + ".lora_A.weight", &it->second.a);
      slots.emplace_back(p + ".lora_B.weight", &it->second.b);
    }
  }
  if (head_lora) {
    slots.emplace_back("base_model.model.lm_head.lora_A.weight", &head_lora->a);
    slots.emplace_back("base_model.model.lm_head.lora_B.weight", &head_lora->b);
  }
  return slots;
}

NamedTensors LlamaModel::LoraWeights() const {
  NamedTensors out;
  for (auto& [name, slot] : const_cast<LlamaModel*>(this)->LoraWeightSlots()) out.emplace_back(name, *slot);
  return out;
}

void LlamaModel::AddLora(const LoraSpec& spec, uint64_t seed) {
  torch::NoGradGuard no_grad;
  if (spec.rank <= 0) throw Error(Code::kInvalidArgument, "lora.rank must be positive", "lora.rank");
  RequireDenseMlpTargets(config, spec.targets, "lora.targets");
  auto gen = at::make_generator<at::CPUGeneratorImpl>(seed);
  lora = spec;
  // PEFT: kaiming_uniform_(a=sqrt(5)) on A, i.e. U(-1/sqrt(in), 1/sqrt(in)); B = 0.
  auto new_pair = [&](const torch::Tensor& w) {  // w (out, in)
    const int64_t out = w.size(0), in = w.size(1);
    double bound = 1.0 / std::sqrt(static_cast<double>(in));
    LoraPair pair;
    pair.a = torch::empty({spec.rank, in}).uniform_(-bound, bound, gen).to(device);  // (r, in)
    pair.b = torch::zeros({out, spec.rank}, torch::TensorOptions().device(device));  // (out, r)
    return pair;
  };
  head_lora.reset();
  for (auto& l : layers) {
    l.lora.clear();
    for (const auto& target : spec.targets) {
      // A mixture of experts' layer has no dense gate/up/down to adapt.
      if (target != kHeadTarget && TargetWeight(l, target).defined())
        l.lora.emplace(target, new_pair(TargetWeight(l, target)));
    }
  }
  for (const auto& target : spec.targets) {
    if (target == kHeadTarget) head_lora = new_pair(lm_head);
  }
}

void LlamaModel::MergeLora() {
  if (!lora) return;
  torch::NoGradGuard no_grad;
  for (auto& l : layers) {
    for (auto& [target, pair] : l.lora) {
      torch::Tensor& w = TargetWeight(l, target);
      w = (w + torch::matmul(pair.b, pair.a) * lora->scale()).contiguous();  // (out, in)
    }
    if (!l.lora.empty()) {  // merged weights are new tensors: the fused matrices are stale
      l.qkv_proj = torch::Tensor();
      l.gate_up_proj = torch::Tensor();
    }
    l.lora.clear();
  }
  if (head_lora) {
    lm_head = HeadWeight().contiguous();  // a new tensor: no longer the embedding
    config.tie_word_embeddings = false;
    head_lora.reset();
  }
  lora.reset();
}

}  // namespace burst
