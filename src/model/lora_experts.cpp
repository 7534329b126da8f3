#include "model/lora_experts.h"

#include <set>

#include "core/status.h"

namespace burst {
namespace {

const char* const kGateUp = "mlp.experts.gate_up_proj";
const char* const kDown = "mlp.experts.down_proj";
const char* const kGateUpPattern = ".*\\.gate_up_proj";

std::string Shape(c10::IntArrayRef s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
  return out + "]";
}

// cfg[key]: absent/null/empty, or exactly {".*\.gate_up_proj": value}.
std::optional<double> GateUpPattern(const Json& cfg, const char* key, const std::string& where) {
  if (!cfg.contains(key) || cfg[key].is_null() || cfg[key].empty()) return std::nullopt;
  const Json& p = cfg[key];
  if (!p.is_object() || p.size() != 1 || !p.contains(kGateUpPattern) || !p[kGateUpPattern].is_number()) {
    throw Error(
        Code::kUnimplemented,
        where + ": " + key + " " + p.dump() +
            " is not supported (Burst reads the one PEFT writes for fused experts: \".*\\\\.gate_up_proj\")",
        key);
  }
  return p[kGateUpPattern].get<double>();
}

}  // namespace

std::string ExpertLoraPath(size_t layer, const std::string& which, bool both) {
  return "base_model.model.model.layers." + std::to_string(layer) + ".mlp.experts." +
         (which == "gate_up" && both ? "base_layer." : "");
}

ExpertAdapter ReadExpertAdapterConfig(const Json& cfg, const LlamaConfig& config, const LoraSpec& spec,
                                      const std::string& where) {
  ExpertAdapter a;
  const Json params = cfg.value("target_parameters", Json());
  if (config.num_experts > 0 && cfg.contains("target_modules") && cfg["target_modules"].is_array()) {
    for (const Json& t : cfg["target_modules"]) {
      const std::string name = t.is_string() ? t.get<std::string>() : "";
      if (name == "gate_proj" || name == "up_proj" || name == "down_proj") {
        throw Error(
            Code::kUnimplemented,
            where + ": target_modules has " + name +
                ", transformers 4's per-expert modules; Burst reads a mixture of experts' adapter as PEFT "
                "writes it for transformers 5 (target_parameters mlp.experts.gate_up_proj, down_proj)",
            "target_modules");
      }
    }
  }
  if (!params.is_null() && !params.empty()) {
    if (!params.is_array())
      throw Error(Code::kInvalidArgument, where + ": target_parameters must be a list", "target_parameters");
    for (const Json& p : params) {
      // PEFT matches a parameter by its name's end: "gate_up_proj",
      // "experts.gate_up_proj" and "mlp.experts.gate_up_proj" are the same.
      const std::string name = p.is_string() ? p.get<std::string>() : p.dump();
      const auto names = [&](const std::string& full) {
        return full.size() >= name.size() &&
               full.compare(full.size() - name.size(), name.size(), name) == 0 &&
               (full.size() == name.size() || full[full.size() - name.size() - 1] == '.');
      };
      const bool gate_up = names(kGateUp), down = names(kDown);
      if (config.num_experts <= 0 || (!gate_up && !down)) {
        throw Error(Code::kUnimplemented,
                    where + ": target_parameters \"" + name +
                        "\" is not supported (Burst adapts a mixture of experts' " + kGateUp + " and " +
                        kDown + ")",
                    "target_parameters");
      }
      (gate_up ? a.gate_up : a.down) = true;
    }
  }
  const std::optional<double> rank = GateUpPattern(cfg, "rank_pattern", where),
                              alpha = GateUpPattern(cfg, "alpha_pattern", where);
  if ((rank || alpha) && !a.gate_up) {
    throw Error(Code::kUnimplemented,
                where + ": a rank or alpha pattern for gate_up_proj, which it does not adapt",
                "rank_pattern");
  }
  a.gate_up_rank = rank ? static_cast<int64_t>(*rank) : spec.rank;
  const double gate_up_alpha = alpha ? *alpha : spec.alpha;
  if (a.gate_up && (a.gate_up_rank <= 0 ||
                    std::abs(gate_up_alpha / static_cast<double>(a.gate_up_rank) - spec.scale()) > 1e-12)) {
    throw Error(
        Code::kUnimplemented,
        where + ": gate_up_proj's alpha / rank differs from the adapter's (Burst scales every pair alike)",
        "alpha_pattern");
  }
  return a;
}

std::vector<std::map<std::string, LoraPair>> TakeExpertPairs(const LlamaModel& model, const ExpertAdapter& a,
                                                             int64_t rank, const TensorMap& weights,
                                                             const std::string& file,
                                                             std::set<std::string>* used) {
  std::vector<std::map<std::string, LoraPair>> out(model.layers.size());
  const LlamaConfig& c = model.config;
  const int64_t e = c.num_experts, fm = c.moe_intermediate_size, h = c.hidden_size;
  for (size_t i = 0; i < model.layers.size(); ++i) {
    if (!model.layers[i].router.defined()) continue;
    for (const char* which : {"gate_up", "down"}) {
      const bool gate_up = std::string(which) == "gate_up";
      if (!(gate_up ? a.gate_up : a.down)) continue;
      const std::string p = ExpertLoraPath(i, which, a.gate_up && a.down);
      const int64_t r = gate_up ? a.gate_up_rank : rank, in = gate_up ? h : fm, outs = gate_up ? 2 * fm : h;
      auto ta = weights.find(p + "lora_A.weight"), tb = weights.find(p + "lora_B.weight");
      if (ta == weights.end() || tb == weights.end())
        throw Error(Code::kInvalidArgument, file + ": missing " + p + "lora_A/B.weight", p);
      LoraPair pair{ta->second.to(torch::kFloat32), tb->second.to(torch::kFloat32)};
      if (pair.a.sizes() != torch::IntArrayRef({e * r, in}) ||
          pair.b.sizes() != torch::IntArrayRef({outs, e * r})) {
        throw Error(Code::kInvalidArgument,
                    file + ": " + p + " lora_A " + Shape(pair.a.sizes()) + " / lora_B " +
                        Shape(pair.b.sizes()) + " do not fit " + std::to_string(e) + " experts of rank " +
                        std::to_string(r) + " (want " + Shape({e * r, in}) + " / " + Shape({outs, e * r}) +
                        ")",
                    p);
      }
      used->insert(ta->first);
      used->insert(tb->first);
      pair.a = pair.a.to(model.device).contiguous();
      pair.b = pair.b.to(model.device).contiguous();
      out[i].emplace(which, std::move(pair));
    }
  }
  return out;
}

void WriteExpertAdapterConfig(const LlamaModel& model, Json& cfg) {
  if (model.config.num_experts <= 0) return;
  const LoraSpec& spec = *model.lora;
  Json modules = Json::array(), params = Json::array();
  for (const std::string& t : spec.targets)
    if (t != "gate_proj" && t != "up_proj" && t != "down_proj") modules.push_back(t);
  int64_t gate_up_rank = 0;
  bool down = false;
  for (const LlamaLayer& l : model.layers) {
    auto gu = l.expert_lora.find("gate_up");
    if (gu != l.expert_lora.end()) gate_up_rank = gu->second.a.size(0) / model.config.num_experts;
    down = down || l.expert_lora.count("down");
  }
  if (gate_up_rank > 0) params.push_back(kGateUp);
  if (down) params.push_back(kDown);
  cfg["target_modules"] = modules;
  cfg["target_parameters"] = params;
  if (gate_up_rank > 0 && gate_up_rank != spec.rank) {
    cfg["rank_pattern"] = {{kGateUpPattern, gate_up_rank}};
    cfg["alpha_pattern"] = {{kGateUpPattern, spec.alpha * static_cast<double>(gate_up_rank) / spec.rank}};
  }
}

}  // namespace burst
