// Notation: N tokens, C hidden size, E experts, K picked per token, Fm an
// expert's width.
#include "model/moe.h"

#include <algorithm>
#include <utility>

#include "model/moe_experts.h"
#include "model/small_linear.h"

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

// Expert i's SwiGLU on its rows xe (n, C) -> (n, C), with its LoRA.
torch::Tensor Expert(const torch::Tensor& xe, const LlamaLayer& l, size_t i, const ExpertPairs& gate_up,
                     const ExpertPairs& down, double lora_scale) {
  torch::Tensor g, u;  // (n, Fm)
  const bool fused = ExpertGateUpFused(l, i);
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

// Rows grouped by expert (counts[e] for expert e, in expert order) through
// their experts: on the threads (moe_experts.h) where that applies, else
// one expert after another under autograd.
torch::Tensor RunExperts(const torch::Tensor& rows, const std::vector<int64_t>& counts, const LlamaLayer& l,
                         double lora_scale) {
  if (ExpertsOnThreadsApply(rows, l)) return ExpertsOnThreads(rows, counts, l, lora_scale);
  const auto e_count = static_cast<int64_t>(counts.size());
  const auto find = [&](const char* which) -> const LoraPair* {
    auto it = l.expert_lora.find(which);
    return lora_scale > 0.0 && it != l.expert_lora.end() ? &it->second : nullptr;
  };
  const ExpertPairs gate_up = Split(find("gate_up"), e_count), down = Split(find("down"), e_count);
  const std::vector<torch::Tensor> xs = rows.split_with_sizes(counts, 0);  // E of (n, C)
  std::vector<torch::Tensor> outs;
  for (size_t e = 0; e < counts.size(); ++e)
    if (counts[e] > 0) outs.push_back(Expert(xs[e], l, e, gate_up, down, lora_scale));
  return outs.size() == 1 ? outs[0] : torch::cat(outs, 0);
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

  // One token without autograd (decoding one sequence): its K experts in
  // expert order, the same products and the same sums as the grouped path
  // below, without its sorting, counting, gathering and index_add.
  if (flat.size(0) == 1 && NoGradKernelsAllowed()) {
    const torch::Tensor picked = experts.reshape({-1}).to(torch::kCPU).contiguous();
    std::vector<std::pair<int64_t, int64_t>> picks;  // (expert, choice)
    for (int64_t j = 0; j < k; ++j) picks.emplace_back(picked.data_ptr<int64_t>()[j], j);
    std::sort(picks.begin(), picks.end());
    std::vector<int64_t> counts(static_cast<size_t>(e_count), 0);
    for (const auto& pick : picks) ++counts[static_cast<size_t>(pick.first)];
    const torch::Tensor y = RunExperts(flat.expand({k, c}).contiguous(), counts, l, lora_scale);  // (K, C)
    torch::Tensor out = torch::zeros_like(flat);
    for (size_t i = 0; i < picks.size(); ++i)
      out.add_(y.narrow(0, static_cast<int64_t>(i), 1) * weights.narrow(1, picks[i].second, 1));
    return out.view(x.sizes());
  }

  // The (token, choice) pairs grouped by expert, tokens in order within each.
  const torch::Tensor pick = experts.reshape({-1});  // (N*K)
  const torch::Tensor order =
      std::get<1>(pick.sort(/*stable=*/true, /*dim=*/0, /*descending=*/false));  // (N*K)
  const torch::Tensor token = order.div(k, "floor");                             // (N*K)
  const torch::Tensor count_t = torch::bincount(pick, {}, e_count).to(torch::kCPU);
  const std::vector<int64_t> counts(count_t.data_ptr<int64_t>(), count_t.data_ptr<int64_t>() + e_count);
  const torch::Tensor scale = weights.reshape({-1}).index_select(0, order).unsqueeze(1);           // (N*K, 1)
  const torch::Tensor y = RunExperts(flat.index_select(0, token), counts, l, lora_scale) * scale;  // (N*K, C)
  return torch::zeros_like(flat).index_add(0, token, y).view(x.sizes());                           // (..., C)
}

}  // namespace burst
