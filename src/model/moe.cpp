// Notation: N tokens, C hidden size, E experts, K picked per token, Fm an
// expert's width.
#include "model/moe.h"

namespace burst {

torch::Tensor SparseMoe(const torch::Tensor& x, const LlamaLayer& l, int64_t k, bool norm_topk,
                        std::vector<torch::Tensor>* choices) {
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
  std::vector<torch::Tensor> outs;
  int64_t at = 0;
  for (int64_t e = 0; e < e_count; ++e) {
    const int64_t n = counts[e].item<int64_t>();
    if (n == 0) continue;
    const auto i = static_cast<size_t>(e);
    const torch::Tensor xe = rows.narrow(0, at, n);  // (n, C)
    const torch::Tensor h =
        torch::silu(torch::linear(xe, l.expert_gate[i])) * torch::linear(xe, l.expert_up[i]);  // (n, Fm)
    outs.push_back(torch::linear(h, l.expert_down[i]));                                        // (n, C)
    at += n;
  }
  const torch::Tensor scale = weights.reshape({-1}).index_select(0, order).unsqueeze(1);  // (N*K, 1)
  const torch::Tensor y = torch::cat(outs, 0) * scale;                                    // (N*K, C)
  return torch::zeros_like(flat).index_add(0, token, y).view(x.sizes());                  // (..., C)
}

}  // namespace burst
