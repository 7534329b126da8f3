// Notation: N tokens, C hidden size, E experts, K picked per token, Fm an
// expert's width.
#include "model/moe.h"

namespace burst {

namespace {

// Expert e's LoRA branch of `pair` (A (E*R, in), B (out, E*R), PEFT's
// layout): scale * x A_e^T B_e^T, A_e its rows e*R.., B_e its columns e,
// e+E, ... (B seen as (out, R, E)).
torch::Tensor ExpertLora(const LoraPair& pair, const torch::Tensor& x, int64_t e, int64_t experts,
                         double scale) {
  const int64_t r = pair.a.size(0) / experts;
  const torch::Tensor a = pair.a.narrow(0, e * r, r);                              // (R, in)
  const torch::Tensor b = pair.b.view({pair.b.size(0), r, experts}).select(2, e);  // (out, R)
  return torch::linear(torch::linear(x, a), b) * scale;                            // (n, out)
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

  // The (token, choice) pairs grouped by expert, tokens in order within each.
  const torch::Tensor pick = experts.reshape({-1});  // (N*K)
  const torch::Tensor order =
      std::get<1>(pick.sort(/*stable=*/true, /*dim=*/0, /*descending=*/false));     // (N*K)
  const torch::Tensor token = order.div(k, "floor");                                // (N*K)
  const torch::Tensor counts = torch::bincount(pick, {}, e_count).to(torch::kCPU);  // (E)
  const torch::Tensor rows = flat.index_select(0, token);                           // (N*K, C)
  const auto find = [&](const char* which) -> const LoraPair* {
    auto it = l.expert_lora.find(which);
    return lora_scale > 0.0 && it != l.expert_lora.end() ? &it->second : nullptr;
  };
  const LoraPair *gate_up = find("gate_up"), *down = find("down");
  std::vector<torch::Tensor> outs;
  int64_t at = 0;
  for (int64_t e = 0; e < e_count; ++e) {
    const int64_t n = counts[e].item<int64_t>();
    if (n == 0) continue;
    const auto i = static_cast<size_t>(e);
    const torch::Tensor xe = rows.narrow(0, at, n);                                                // (n, C)
    torch::Tensor g = torch::linear(xe, l.expert_gate[i]), u = torch::linear(xe, l.expert_up[i]);  // (n, Fm)
    if (gate_up != nullptr) {
      const torch::Tensor d = ExpertLora(*gate_up, xe, e, e_count, lora_scale);  // (n, 2Fm)
      g = g + d.narrow(1, 0, g.size(1));
      u = u + d.narrow(1, g.size(1), u.size(1));
    }
    const torch::Tensor h = torch::silu(g) * u;            // (n, Fm)
    torch::Tensor y = torch::linear(h, l.expert_down[i]);  // (n, C)
    if (down != nullptr) y = y + ExpertLora(*down, h, e, e_count, lora_scale);
    outs.push_back(y);
    at += n;
  }
  const torch::Tensor scale = weights.reshape({-1}).index_select(0, order).unsqueeze(1);  // (N*K, 1)
  const torch::Tensor y = torch::cat(outs, 0) * scale;                                    // (N*K, C)
  return torch::zeros_like(flat).index_add(0, token, y).view(x.sizes());                  // (..., C)
}

}  // namespace burst
