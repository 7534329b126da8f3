#include "train/loop_run.h"

#include <cmath>
#include <optional>

#include "core/status.h"
#include "train/loop_pack.h"

namespace burst {

// ----------------------------------------------------------------------------
// losses

torch::Tensor LoopTokenLoss(const std::string& loss_fn, const torch::Tensor& lp,
                            const std::map<std::string, torch::Tensor>& inputs,
                            const std::map<std::string, double>& config) {
  auto in = [&](const char* name) -> const torch::Tensor& {
    auto it = inputs.find(name);
    if (it == inputs.end()) throw Error(Code::kInvalidArgument, loss_fn + " needs the input " + name, name);
    return it->second;
  };
  auto setting = [&](const char* name) {
    auto it = config.find(name);
    if (it == config.end())
      throw Error(Code::kInternal, loss_fn + ": setting " + std::string(name) + " missing");
    return it->second;
  };
  // A per-token threshold when the datum has one, else the config's.
  auto threshold = [&](const char* name) {
    auto it = inputs.find(name);
    return it != inputs.end() ? it->second : torch::full_like(lp, setting(name));
  };
  if (loss_fn == "cross_entropy") return -in("weights") * lp;  // (N)
  const torch::Tensor& q = in("logprobs");                     // (N) the sampler's
  const torch::Tensor& adv = in("advantages");                 // (N)
  if (loss_fn == "dro") {
    const double beta = setting("beta");
    return -(lp * adv - (beta / 2.0) * (lp - q).pow(2));
  }
  torch::Tensor ratio = torch::exp(lp - q);  // (N)
  if (loss_fn == "importance_sampling") return -(ratio * adv);
  torch::Tensor lo = threshold("clip_low_threshold"), hi = threshold("clip_high_threshold");
  torch::Tensor clipped = torch::min(torch::max(ratio, lo), hi);  // (N)
  if (loss_fn == "ppo") return -torch::min(ratio * adv, clipped * adv);
  if (loss_fn == "cispo") return -(clipped.detach() * lp * adv);
  throw Error(Code::kInvalidArgument, "unknown loss_fn \"" + loss_fn + "\"", "loss_fn");
}

// ----------------------------------------------------------------------------
// the run

LoraSpec LoopLoraSpec(const LoopLoraOptions& lora) {
  if (lora.rank <= 0)
    throw Error(Code::kInvalidArgument, "lora_config.rank must be positive", "lora_config.rank");
  LoraSpec spec;
  spec.rank = lora.rank;
  spec.alpha = lora.alpha;
  spec.dropout = 0.0;
  spec.targets.clear();
  if (lora.train_attn) spec.targets.insert(spec.targets.end(), {"q_proj", "k_proj", "v_proj", "o_proj"});
  if (lora.train_mlp) spec.targets.insert(spec.targets.end(), {"gate_proj", "up_proj", "down_proj"});
  if (lora.train_unembed) spec.targets.push_back("lm_head");
  if (spec.targets.empty()) {
    throw Error(Code::kInvalidArgument,
                "lora_config trains nothing: set train_attn, train_mlp or train_unembed", "lora_config");
  }
  return spec;
}

namespace {

// Datums whose inputs share at least kMinSharedPrefix leading tokens (and
// half of each) share a packed row of up to kMaxPackedWidth tokens (or the
// longest datum's): its attention spans the whole row.
constexpr int64_t kMinSharedPrefix = 16;
constexpr int64_t kMaxPackedWidth = 512;

// The datums end to end in one row: token i of the concatenation is flat
// index i (LoopPacking's layout with G = 1, no mask).
LoopPacking EndToEnd(const std::vector<std::vector<int64_t>>& seqs) {
  LoopPacking pk;
  for (const auto& sq : seqs) pk.ids.insert(pk.ids.end(), sq.begin(), sq.end());
  pk.rows = 1;
  pk.width = static_cast<int64_t>(pk.ids.size());
  pk.fed = pk.width;
  pk.token_rows.resize(pk.ids.size());
  for (size_t i = 0; i < pk.ids.size(); ++i) pk.token_rows[i] = static_cast<int64_t>(i);
  return pk;
}

// The (row, target) pairs whose loss term can have a gradient: a nonzero
// weight (cross_entropy) or advantage (the policy losses but dro, whose
// penalty has one everywhere). `pick` maps each datum token to its pair.
std::vector<int64_t> PairsWithGradient(const std::string& loss_fn, const std::vector<LoopDatum>& data,
                                       const std::vector<int64_t>& pick, int64_t pairs) {
  const char* by = loss_fn == "cross_entropy" ? "weights" : loss_fn == "dro" ? nullptr : "advantages";
  std::vector<char> need(static_cast<size_t>(pairs), by == nullptr ? 1 : 0);
  if (by != nullptr) {
    size_t at = 0;
    for (const LoopDatum& d : data) {
      auto it = d.inputs.find(by);
      for (size_t j = 0; j < d.tokens.size(); ++j, ++at) {
        if (it == d.inputs.end() || j >= it->second.size() || it->second[j] != 0.0F)
          need[static_cast<size_t>(pick[at])] = 1;
      }
    }
  }
  std::vector<int64_t> out;
  for (int64_t i = 0; i < pairs; ++i)
    if (need[static_cast<size_t>(i)] != 0) out.push_back(i);
  return out;
}

LlamaModel WithAdapter(const LlamaModel& base, const LoopLoraOptions& lora) {
  LlamaModel m = base;  // shares the frozen base tensors
  m.AddLora(LoopLoraSpec(lora), lora.seed);
  for (auto& [name, slot] : m.LoraWeightSlots()) slot->set_requires_grad(true);
  return m;
}

}  // namespace

LoopRun::LoopRun(const LlamaModel& base, const LoopLoraOptions& lora)
    : lora_(lora), model_(WithAdapter(base, lora)), opt_(model_.LoraWeights(), 0.9, 0.95, 1e-12, 0.0) {}

LoopForwardResult LoopRun::Forward(const std::vector<LoopDatum>& data, const std::string& loss_fn,
                                   const std::map<std::string, double>& config, bool backward) {
  if (data.empty()) throw Error(Code::kInvalidArgument, "no datums", "data");
  const int64_t b = static_cast<int64_t>(data.size());
  int64_t t = 0, n = 0;
  std::vector<std::vector<int64_t>> seqs;
  std::vector<int64_t> targets;                    // (N) datum order
  std::map<std::string, std::vector<float>> flat;  // inputs over the N real tokens, datum order
  for (int64_t i = 0; i < b; ++i) {
    const LoopDatum& d = data[static_cast<size_t>(i)];
    if (d.targets.size() != d.tokens.size()) {
      throw Error(Code::kInvalidArgument,
                  "datum " + std::to_string(i) + ": target_tokens and tokens differ in length",
                  "target_tokens");
    }
    t = std::max<int64_t>(t, static_cast<int64_t>(d.tokens.size()));
    n += static_cast<int64_t>(d.tokens.size());
    seqs.emplace_back(d.tokens.begin(), d.tokens.end());
    targets.insert(targets.end(), d.targets.begin(), d.targets.end());
    for (const auto& [name, v] : d.inputs) {
      auto& f = flat[name];
      f.insert(f.end(), v.begin(), v.end());
    }
  }
  for (const auto& [name, f] : flat) {
    if (static_cast<int64_t>(f.size()) != n) {
      throw Error(Code::kInvalidArgument, "input " + name + " is missing from some datums", name);
    }
  }
  // Datums sharing a prompt (a group of completions) share a packed row, the
  // prompt computed once (train/loop_pack.h); padding sits after each row's
  // tokens, which the mask keeps out of every real position. Data sharing
  // nothing is one datum per row, plainly causal.
  LoopPacking pk = PackLoopData(seqs, kMinSharedPrefix, std::max(t, kMaxPackedWidth));
  ForwardOptions fo;
  if (pk.mask.empty() && pk.rows > 1) {
    // Nothing shared: the datums end to end in one row (1, N), each
    // attending to itself, as `burst train` packs a batch (no padding).
    pk = EndToEnd(seqs);
    for (const auto& sq : seqs) fo.seq_lens.push_back(static_cast<int64_t>(sq.size()));
  }
  torch::Tensor ids =
      torch::tensor(pk.ids, torch::kInt64).view({pk.rows, pk.width}).to(model_.device);  // (G, T)
  if (!pk.mask.empty()) {
    fo.positions = torch::tensor(pk.positions, torch::kInt64).view({pk.rows, pk.width});
    // A view of pk's mask, which outlives the forward and backward below.
    fo.attn_mask =
        torch::from_blob(const_cast<float*>(pk.mask.data()), {pk.rows, pk.width, pk.width}, torch::kFloat32);
  }
  // Each token's (packed row, target) once: a shared prompt's tokens are one
  // pair for every datum of the group.
  std::vector<int64_t> pair_rows, pair_targets, pick;
  std::map<std::pair<int64_t, int64_t>, int64_t> pairs;
  for (int64_t i = 0; i < n; ++i) {
    const auto key = std::make_pair(pk.token_rows[static_cast<size_t>(i)], targets[static_cast<size_t>(i)]);
    auto [it, fresh] = pairs.emplace(key, static_cast<int64_t>(pair_rows.size()));
    if (fresh) {
      pair_rows.push_back(key.first);
      pair_targets.push_back(key.second);
    }
    pick.push_back(it->second);
  }

  std::optional<torch::NoGradGuard> no_grad;
  if (!backward) no_grad.emplace();
  torch::Tensor hidden = model_.Hidden(ids, nullptr, fo);  // (G, T, C)
  const torch::Tensor rows = torch::tensor(pair_rows).to(model_.device);
  const torch::Tensor tgts = torch::tensor(pair_targets).to(model_.device);
  const std::vector<int64_t> grad_pairs =
      backward ? PairsWithGradient(loss_fn, data, pick, static_cast<int64_t>(pair_rows.size()))
               : std::vector<int64_t>{};
  torch::Tensor logp;
  if (grad_pairs.empty() || grad_pairs.size() == pair_rows.size()) {
    logp = RowTargetLogProbs(model_, hidden, rows, tgts);  // (pairs)
  } else {
    // Every token's log-probability is an output, but only the tokens whose
    // loss term has a gradient (a weight, an advantage) go through the LM
    // head's backward: the rest come from a pass without autograd.
    {
      torch::NoGradGuard values_only;
      logp = RowTargetLogProbs(model_, hidden.detach(), rows, tgts);  // (pairs)
    }
    const torch::Tensor at = torch::tensor(grad_pairs).to(model_.device);
    logp = logp.index_copy(
        0, at, RowTargetLogProbs(model_, hidden, rows.index_select(0, at), tgts.index_select(0, at)));
  }
  if (static_cast<int64_t>(pair_rows.size()) != n) {
    logp = logp.index_select(0, torch::tensor(pick).to(model_.device));  // (N) datum order
  }
  std::map<std::string, torch::Tensor> inputs;
  for (auto& [name, f] : flat) inputs[name] = torch::tensor(f, torch::kFloat32).to(model_.device);  // (N)
  torch::Tensor loss = LoopTokenLoss(loss_fn, logp, inputs, config);                                // (N)
  torch::Tensor total = loss.sum();
  if (backward) {
    total.backward();
    pending_ = true;
  }

  LoopForwardResult out;
  torch::Tensor lp_cpu = logp.detach().to(torch::kCPU).contiguous();
  torch::Tensor loss_cpu = loss.detach().to(torch::kCPU).contiguous();
  const float* lp_p = lp_cpu.data_ptr<float>();
  const float* loss_p = loss_cpu.data_ptr<float>();
  int64_t at = 0;
  for (const auto& d : data) {
    const int64_t len = static_cast<int64_t>(d.tokens.size());
    std::map<std::string, std::vector<float>> o;
    o["logprobs"].assign(lp_p + at, lp_p + at + len);
    o["elementwise_loss"].assign(loss_p + at, loss_p + at + len);
    out.outputs.push_back(std::move(o));
    at += len;
  }
  out.loss_sum = total.item<double>();
  out.tokens = n;
  out.fed_tokens = pk.fed;
  return out;
}

Json LoopRun::OptimStep(const LoopAdamParams& p) {
  if (!(p.learning_rate >= 0) || !(p.beta1 >= 0 && p.beta1 < 1) || !(p.beta2 >= 0 && p.beta2 < 1) ||
      !(p.eps >= 0) || !(p.weight_decay >= 0) || !(p.grad_clip_norm >= 0)) {
    throw Error(
        Code::kInvalidArgument,
        "adam_params: need learning_rate >= 0, 0 <= beta1, beta2 < 1, eps >= 0, weight_decay >= 0 and "
        "grad_clip_norm >= 0",
        "adam_params");
  }
  NamedTensors params = model_.LoraWeights();
  std::vector<torch::Tensor> ps;
  for (auto& [name, t] : params) ps.push_back(t);
  const double norm = ClipGradNorm(ps, p.grad_clip_norm);
  opt_.SetHyperparameters(p.beta1, p.beta2, p.eps, p.weight_decay);
  opt_.Step(p.learning_rate);
  for (auto& t : ps) t.mutable_grad() = torch::Tensor();
  pending_ = false;
  return {{"grad_norm", norm}, {"learning_rate", p.learning_rate}, {"step", opt_.steps()}};
}

NamedTensors LoopRun::State() const {
  NamedTensors out;
  for (const auto& [name, t] : model_.LoraWeights()) out.emplace_back("lora." + name, t.detach());
  for (const auto& [name, t] : opt_.State()) out.emplace_back(name, t);
  out.emplace_back("step", torch::tensor({opt_.steps()}, torch::kInt64));
  return out;
}

void LoopRun::LoadState(const TensorMap& state, bool with_optimizer) {
  torch::NoGradGuard no_grad;
  // Check every tensor before changing any, so a bad state leaves the run as it was.
  auto slots = model_.LoraWeightSlots();
  for (auto& [name, slot] : slots) {
    auto it = state.find("lora." + name);
    if (it == state.end() || !it->second.sizes().equals(slot->sizes())) {
      throw Error(Code::kInvalidArgument,
                  "the checkpoint lacks or misshapes " + name +
                      " (a checkpoint of another model or LoRA configuration?)",
                  "path");
    }
  }
  auto step = state.find("step");
  if (with_optimizer && (step == state.end() || step->second.numel() != 1)) {
    throw Error(Code::kInvalidArgument,
                "the checkpoint has no optimizer state (saved with save_weights_for_sampler?)", "path");
  }
  if (with_optimizer) {
    for (auto& [name, slot] : slots) {
      for (const char* kind : {"exp_avg.", "exp_avg_sq."}) {
        auto it = state.find(kind + name);
        if (it == state.end() || !it->second.sizes().equals(slot->sizes())) {
          throw Error(Code::kInvalidArgument,
                      "the checkpoint's optimizer state lacks or misshapes " + std::string(kind) + name,
                      "path");
        }
      }
    }
  }
  for (auto& [name, slot] : slots) {
    slot->copy_(state.at("lora." + name));
    slot->mutable_grad() = torch::Tensor();
  }
  if (with_optimizer) {
    opt_.LoadState(state, step->second.item<int64_t>());
  } else {
    opt_ = AdamW(model_.LoraWeights(), 0.9, 0.95, 1e-12, 0.0);
  }
  pending_ = false;
}

}  // namespace burst
