// Notation: N tokens, C hidden size, E experts, K picked per token, Fm an
// expert's width.
#include "model/moe.h"

#include <algorithm>
#include <utility>

namespace burst {

namespace {

// A LoRA pair over all E experts (PEFT's layout: A (E*R, in), B (out, E*R),
// expert e's A its rows e*R.., its B the columns e, e+E, ...) as E pairs of
// contiguous views: (R, in) and (out, R). One split of each per forward: a
// slice per expert would make each backward zero-fill the whole tensor.
struct ExpertPairs {
  std::vector<torch::Tensor> a, b;
};
ExpertPairs Split(const LoraPair* pair, int64_t experts) {
  ExpertPairs out;
  if (pair == nullptr) return out;
  const int64_t r = pair->a.size(0) / experts, in = pair->a.size(1), outs = pair->b.size(0);
  out.a = pair->a.view({experts, r, in}).unbind(0);
  out.b = pair->b.view({outs, r, experts}).permute({2, 0, 1}).contiguous().unbind(0);
  return out;
}

// y + scale * x A^T B^T in one GEMM with accumulation.
torch::Tensor AddLora(const torch::Tensor& y, const torch::Tensor& x, const ExpertPairs& p, size_t e,
                      double scale) {
  if (p.a.empty()) return y;
  return torch::addmm(y, torch::linear(x, p.a[e]), p.b[e].t(), 1.0, scale);
}

// Whether expert i's gate and up are still the row blocks of its fused
// matrix (FreezeBaseAs), and frozen (a part that trains needs its own product).
bool GateUpFused(const LlamaLayer& l, size_t i) {
  if (i >= l.expert_gate_up.size() || !l.expert_gate_up[i].defined()) return false;
  const torch::Tensor &f = l.expert_gate_up[i], &g = l.expert_gate[i], &u = l.expert_up[i];
  return !g.requires_grad() && !u.requires_grad() && g.is_alias_of(f) && u.is_alias_of(f) &&
         g.storage_offset() == f.storage_offset() &&
         u.storage_offset() == f.storage_offset() + g.size(0) * f.stride(0);
}

// Expert i's SwiGLU on its rows xe (n, C) -> (n, C), with its LoRA.
torch::Tensor Expert(const torch::Tensor& xe, const LlamaLayer& l, size_t i, const ExpertPairs& gate_up,
                     const ExpertPairs& down, double lora_scale) {
  torch::Tensor g, u;  // (n, Fm)
  const bool fused = GateUpFused(l, i);
  if (fused || !gate_up.a.empty()) {
    const torch::Tensor w = fused ? l.expert_gate_up[i] : torch::cat({l.expert_gate[i], l.expert_up[i]});
    const std::vector<torch::Tensor> gu =
        AddLora(torch::linear(xe, w), xe, gate_up, i, lora_scale).chunk(2, 1);
    g = gu[0];
    u = gu[1];
  } else {
    g = torch::linear(xe, l.expert_gate[i]);
    u = torch::linear(xe, l.expert_up[i]);
  }
  const torch::Tensor h = torch::silu(g) * u;                                  // (n, Fm)
  return AddLora(torch::linear(h, l.expert_down[i]), h, down, i, lora_scale);  // (n, C)
}

}  // namespace

torch::Tensor SparseMoe(const torch::Tensor& x, const LlamaLayer& l, int64_t k, bool norm_topk,
                        std::vector<torch::Tensor>* choices, double lora_scale) {
  const int64_t c = x.size(-1), e_count = l.router.size(0);
  const torch::Tensor flat = x.reshape({-1, c});                            // (N, C)
  const torch::Tensor logits = torch::linear(flat, l.router);               // (N, E)
  const torch::Tensor probs = torch::softmax(logits, -1, torch::kFloat32);  // (N, E)
  auto [weights, experts] = probs.topk(k, -1);                              // (N, K) each
  if (norm_topk) weights = weights / weights.sum(-1, /*keepdim=*/true);
  weights = weights.to(flat.scalar_type());
  if (choices != nullptr) choices->push_back(experts.detach());

  const auto find = [&](const char* which) -> const LoraPair* {
    auto it = l.expert_lora.find(which);
    return lora_scale > 0.0 && it != l.expert_lora.end() ? &it->second : nullptr;
  };
  const ExpertPairs gate_up = Split(find("gate_up"), e_count), down = Split(find("down"), e_count);

  // One token without autograd (decoding one sequence): its K experts in
  // expert order, the same products and the same sums as the grouped path
  // below, without its sorting, counting and splitting.
  if (flat.size(0) == 1 && !torch::GradMode::is_enabled()) {
    const torch::Tensor picked = experts.reshape({-1}).to(torch::kCPU).contiguous();
    std::vector<std::pair<int64_t, int64_t>> picks;  // (expert, choice)
    for (int64_t j = 0; j < k; ++j) picks.emplace_back(picked.data_ptr<int64_t>()[j], j);
    std::sort(picks.begin(), picks.end());
    torch::Tensor out = torch::zeros_like(flat);
    for (const auto& [e, j] : picks)
      out.add_(Expert(flat, l, static_cast<size_t>(e), gate_up, down, lora_scale) * weights.narrow(1, j, 1));
    return out.view(x.sizes());
  }

  // The (token, choice) pairs grouped by expert, tokens in order within each.
  const torch::Tensor pick = experts.reshape({-1});  // (N*K)
  const torch::Tensor order =
      std::get<1>(pick.sort(/*stable=*/true, /*dim=*/0, /*descending=*/false));  // (N*K)
  const torch::Tensor token = order.div(k, "floor");                             // (N*K)
  const torch::Tensor count_t = torch::bincount(pick, {}, e_count).to(torch::kCPU);
  const std::vector<int64_t> counts(count_t.data_ptr<int64_t>(), count_t.data_ptr<int64_t>() + e_count);
  const std::vector<torch::Tensor> xs =
      flat.index_select(0, token).split_with_sizes(counts, 0);  // E of (n, C)
  std::vector<torch::Tensor> outs;
  for (int64_t e = 0; e < e_count; ++e) {
    if (counts[static_cast<size_t>(e)] == 0) continue;
    outs.push_back(Expert(xs[static_cast<size_t>(e)], l, static_cast<size_t>(e), gate_up, down, lora_scale));
  }
  const torch::Tensor scale = weights.reshape({-1}).index_select(0, order).unsqueeze(1);  // (N*K, 1)
  const torch::Tensor y = torch::cat(outs, 0) * scale;                                    // (N*K, C)
  return torch::zeros_like(flat).index_add(0, token, y).view(x.sizes());                  // (..., C)
}

}  // namespace burst
