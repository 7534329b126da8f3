// LoRA pairs on the Llama projections: creation, PEFT naming, merging.
#include <algorithm>
#include <cmath>

#include "core/status.h"
#include "model/llama.h"
#include "model/lora_experts.h"

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
    auto& experts = layers[i].expert_lora;
    for (auto& [which, pair] : experts) {
      const std::string p = ExpertLoraPath(i, which, experts.size() == 2);
      slots.emplace_back(p + "lora_A.weight", &pair.a);
      slots.emplace_back(p + "lora_B.weight", &pair.b);
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
  if (Status s = CheckExpertLora(config, spec, "lora.targets"); !s.ok()) throw Error(s);
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
  // A mixture of experts' pair over all E experts (PEFT's ParamWrapper on a
  // 3-D weight): A (E*rank, in) kaiming-uniform as one Linear, B zeros.
  auto expert_pair = [&](int64_t experts, int64_t rank, int64_t in, int64_t out) {
    const double bound = 1.0 / std::sqrt(static_cast<double>(in));
    LoraPair pair;
    pair.a = torch::empty({experts * rank, in}).uniform_(-bound, bound, gen).to(device);
    pair.b = torch::zeros({out, experts * rank}, torch::TensorOptions().device(device));
    return pair;
  };
  const auto targeted = [&](const char* t) {
    return std::find(spec.targets.begin(), spec.targets.end(), t) != spec.targets.end();
  };
  head_lora.reset();
  for (auto& l : layers) {
    l.lora.clear();
    l.expert_lora.clear();
    const bool moe_model = config.num_experts > 0;
    for (const auto& target : spec.targets) {
      // In a mixture of experts the MLP targets adapt the experts (below);
      // its dense layers' MLPs are not adapted, as PEFT converts the targets.
      const bool mlp = target == "gate_proj" || target == "up_proj" || target == "down_proj";
      if (target != kHeadTarget && !(moe_model && mlp))
        l.lora.emplace(target, new_pair(TargetWeight(l, target)));
    }
    if (!l.router.defined()) continue;
    const int64_t e = config.num_experts, fm = config.moe_intermediate_size, c = config.hidden_size;
    // gate and up fused: rank and alpha doubled (PEFT's rank_pattern and
    // alpha_pattern), so the scale stays alpha / rank.
    if (targeted("gate_proj")) l.expert_lora.emplace("gate_up", expert_pair(e, 2 * spec.rank, c, 2 * fm));
    if (targeted("down_proj")) l.expert_lora.emplace("down", expert_pair(e, spec.rank, fm, c));
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
    for (auto& [which, pair] : l.expert_lora) {
      const int64_t experts = static_cast<int64_t>(l.expert_gate.size()), r = pair.a.size(0) / experts;
      for (int64_t e = 0; e < experts; ++e) {
        const auto i = static_cast<size_t>(e);
        const torch::Tensor delta = torch::matmul(pair.b.view({pair.b.size(0), r, experts}).select(2, e),
                                                  pair.a.narrow(0, e * r, r)) *
                                    lora->scale();  // (out, in)
        if (which == "down") {
          l.expert_down[i] = (l.expert_down[i] + delta).contiguous();
        } else {
          const int64_t fm = l.expert_gate[i].size(0);
          l.expert_gate[i] = (l.expert_gate[i] + delta.narrow(0, 0, fm)).contiguous();
          l.expert_up[i] = (l.expert_up[i] + delta.narrow(0, fm, fm)).contiguous();
        }
      }
    }
    if (!l.expert_lora.empty()) l.expert_gate_up.clear();  // the merged weights are new tensors
    l.expert_lora.clear();
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
