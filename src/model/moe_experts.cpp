// Notation: M rows (tokens times picks, grouped by expert), C hidden size,
// E experts, F an expert's width, Rg and Rd the LoRA ranks of gate_up and
// down per expert, s the LoRA scale.
#include "model/moe_experts.h"

#include <ATen/Parallel.h>

#include <algorithm>
#include <atomic>
#include <numeric>
#include <optional>

namespace burst {

namespace {

using torch::autograd::AutogradContext;
using torch::autograd::tensor_list;

// What the Function reads besides its differentiable inputs.
struct Plan {
  std::vector<int64_t> counts, starts;  // rows per expert, its first row
  std::vector<int64_t> order;           // the experts with rows, most rows first
  std::vector<torch::Tensor> fused;     // every expert's frozen (2F, C), or empty
  double scale = 0.0;
};

Plan MakePlan(const std::vector<int64_t>& counts, std::vector<torch::Tensor> fused, double scale) {
  Plan p;
  p.counts = counts;
  p.starts.resize(counts.size());
  std::exclusive_scan(counts.begin(), counts.end(), p.starts.begin(), int64_t{0});
  for (size_t e = 0; e < counts.size(); ++e)
    if (counts[e] > 0) p.order.push_back(static_cast<int64_t>(e));
  std::stable_sort(p.order.begin(), p.order.end(), [&](int64_t a, int64_t b) {
    return counts[static_cast<size_t>(a)] > counts[static_cast<size_t>(b)];
  });
  p.fused = std::move(fused);
  p.scale = scale;
  return p;
}

// Below this many rows in all, the experts run one after another on the
// calling thread (each product may still use every thread): a decoding
// step's few rows are not worth a parallel region per layer.
constexpr int64_t kRowsForThreads = 256;

// Runs fn(e) for every expert of the plan, each thread taking the next one
// as it frees up; the products inside run on the thread that took it.
template <typename Fn>
void ForEachExpert(const Plan& p, Fn fn) {
  const int64_t rows = std::accumulate(p.counts.begin(), p.counts.end(), int64_t{0});
  if (rows < kRowsForThreads || at::get_num_threads() == 1) {
    torch::NoGradGuard no_grad;
    for (int64_t e : p.order) fn(static_cast<size_t>(e));
    return;
  }
  std::atomic<size_t> next{0};
  const int64_t threads = std::min<int64_t>(at::get_num_threads(), static_cast<int64_t>(p.order.size()));
  at::parallel_for(0, std::max<int64_t>(1, threads), 1, [&](int64_t /*lo*/, int64_t /*hi*/) {
    torch::NoGradGuard no_grad;  // grad mode is per thread
    for (size_t i = next++; i < p.order.size(); i = next++) fn(static_cast<size_t>(p.order[i]));
  });
}

// PEFT's B (out, E*R), expert e's columns e, e+E, ..., as (E, out, R).
torch::Tensor SplitB(const torch::Tensor& b, int64_t experts) {
  if (!b.defined()) return b;
  return b.view({b.size(0), b.size(1) / experts, experts}).permute({2, 0, 1}).contiguous();
}

// The forward's products, and what the backward reads of them.
struct Activations {
  torch::Tensor x, gu, h, xa, ha;  // (M, C), (M, 2F), (M, F), (M, Rg), (M, Rd)
  torch::Tensor bg, bd;            // PEFT's B split per expert (SplitB)
  torch::Tensor y;                 // (M, C)
};

// xs (M, C); gates, ups (E of (F, C)); downs (E of (C, F)); the LoRA pairs
// (undefined without): a_gu (E*Rg, C), b_gu (2F, E*Rg), a_d (E*Rd, F),
// b_d (C, E*Rd). Without autograd: the same code the Function runs.
Activations Forward(const torch::Tensor& xs, at::TensorList gates, at::TensorList ups, at::TensorList downs,
                    const torch::Tensor& a_gu, const torch::Tensor& b_gu, const torch::Tensor& a_d,
                    const torch::Tensor& b_d, const Plan& p) {
  const auto experts = static_cast<int64_t>(p.counts.size());
  const int64_t m = xs.size(0), c = xs.size(1), f = downs[0].size(1);
  const int64_t rg = a_gu.defined() ? a_gu.size(0) / experts : 0;
  const int64_t rd = a_d.defined() ? a_d.size(0) / experts : 0;
  Activations a;
  a.x = xs.contiguous();
  a.bg = SplitB(b_gu, experts);
  a.bd = SplitB(b_d, experts);
  const auto opts = a.x.options();
  a.gu = torch::empty({m, 2 * f}, opts);
  a.h = torch::empty({m, f}, opts);
  a.y = torch::empty({m, c}, opts);
  if (rg > 0) a.xa = torch::empty({m, rg}, opts);
  if (rd > 0) a.ha = torch::empty({m, rd}, opts);
  ForEachExpert(p, [&](size_t e) {
    const auto ei = static_cast<int64_t>(e);
    const int64_t o = p.starts[e], n = p.counts[e];
    const torch::Tensor xe = a.x.narrow(0, o, n);
    torch::Tensor gue = a.gu.narrow(0, o, n), he = a.h.narrow(0, o, n), ye = a.y.narrow(0, o, n);
    if (!p.fused.empty()) {
      at::mm_out(gue, xe, p.fused[e].t());
    } else {
      torch::Tensor ge = gue.narrow(1, 0, f), ue = gue.narrow(1, f, f);
      at::mm_out(ge, xe, gates[e].t());
      at::mm_out(ue, xe, ups[e].t());
    }
    if (rg > 0) {
      torch::Tensor xae = a.xa.narrow(0, o, n);
      at::mm_out(xae, xe, a_gu.narrow(0, ei * rg, rg).t());
      gue.addmm_(xae, a.bg[ei].t(), 1.0, p.scale);
    }
    at::silu_out(he, gue.narrow(1, 0, f));
    he.mul_(gue.narrow(1, f, f));
    at::mm_out(ye, he, downs[e].t());
    if (rd > 0) {
      torch::Tensor hae = a.ha.narrow(0, o, n);
      at::mm_out(hae, he, a_d.narrow(0, ei * rd, rd).t());
      ye.addmm_(hae, a.bd[ei].t(), 1.0, p.scale);
    }
  });
  return a;
}

class ExpertsFn : public torch::autograd::Function<ExpertsFn> {
 public:
  // Forward's arguments, the pairs as optionals (autograd takes no
  // undefined input) -> (M, C).
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& xs, at::TensorList gates,
                               at::TensorList ups, at::TensorList downs,
                               const std::optional<torch::Tensor>& a_gu_in,
                               const std::optional<torch::Tensor>& b_gu_in,
                               const std::optional<torch::Tensor>& a_d_in,
                               const std::optional<torch::Tensor>& b_d_in, const Plan& p) {
    const torch::Tensor a_gu = a_gu_in.value_or(torch::Tensor()), a_d = a_d_in.value_or(torch::Tensor());
    const Activations a = Forward(xs, gates, ups, downs, a_gu, b_gu_in.value_or(torch::Tensor()), a_d,
                                  b_d_in.value_or(torch::Tensor()), p);
    std::vector<torch::Tensor> saved{a.x, a.gu, a.h, a.xa, a.ha, a_gu, a.bg, a_d, a.bd};
    for (at::TensorList list : {gates, ups, downs}) saved.insert(saved.end(), list.begin(), list.end());
    ctx->save_for_backward(saved);
    ctx->saved_data["counts"] = p.counts;
    ctx->saved_data["fused"] = p.fused;
    ctx->saved_data["scale"] = p.scale;
    return a.y;
  }

  static tensor_list backward(AutogradContext* ctx, tensor_list grads) {
    const std::vector<torch::Tensor> saved = ctx->get_saved_variables();
    const Plan p = MakePlan(ctx->saved_data["counts"].toIntVector(),
                            ctx->saved_data["fused"].toTensorVector(), ctx->saved_data["scale"].toDouble());
    const auto experts = static_cast<int64_t>(p.counts.size());
    const size_t ne = p.counts.size();
    const torch::Tensor &x = saved[0], &gu = saved[1], &h = saved[2], &xa = saved[3], &ha = saved[4];
    const torch::Tensor &a_gu = saved[5], &bg = saved[6], &a_d = saved[7], &bd = saved[8];
    const auto weight = [&](size_t which, size_t e) -> const torch::Tensor& {
      return saved[9 + which * ne + e];
    };
    const int64_t m = x.size(0), c = x.size(1), f = h.size(1);
    const int64_t rg = a_gu.defined() ? a_gu.size(0) / experts : 0;
    const int64_t rd = a_d.defined() ? a_d.size(0) / experts : 0;
    const torch::Tensor dy = grads[0].contiguous();
    const auto opts = x.options();
    // Inputs (edges): xs, gates, ups, downs, then the pairs present of
    // (a_gu, b_gu) and (a_d, b_d).
    const size_t gu_at = 1 + 3 * ne, d_at = gu_at + (rg > 0 ? 2 : 0);
    const bool need_x = ctx->needs_input_grad(0);
    const bool need_gu = rg > 0 && (ctx->needs_input_grad(gu_at) || ctx->needs_input_grad(gu_at + 1));
    const bool need_d = rd > 0 && (ctx->needs_input_grad(d_at) || ctx->needs_input_grad(d_at + 1));
    torch::Tensor dx = need_x ? torch::empty({m, c}, opts) : torch::Tensor();
    torch::Tensor d_agu = need_gu ? torch::zeros_like(a_gu) : torch::Tensor();
    torch::Tensor d_bg = need_gu ? torch::zeros_like(bg) : torch::Tensor();  // (E, 2F, Rg)
    torch::Tensor d_ad = need_d ? torch::zeros_like(a_d) : torch::Tensor();
    torch::Tensor d_bd = need_d ? torch::zeros_like(bd) : torch::Tensor();  // (E, C, Rd)
    std::vector<torch::Tensor> d_w(3 * ne);  // gates, ups, downs; undefined for experts without rows
    ForEachExpert(p, [&](size_t e) {
      const auto ei = static_cast<int64_t>(e);
      const int64_t o = p.starts[e], n = p.counts[e];
      const torch::Tensor dye = dy.narrow(0, o, n), xe = x.narrow(0, o, n), he = h.narrow(0, o, n);
      const torch::Tensor gue = gu.narrow(0, o, n);
      // Down projection: dh = dy W_d + s (dy B_d) A_d.
      torch::Tensor dh = torch::mm(dye, weight(2, e));  // (n, F)
      if (rd > 0) {
        const torch::Tensor ad = a_d.narrow(0, ei * rd, rd);
        const torch::Tensor t = torch::mm(dye, bd[ei]);  // (n, Rd)
        dh.addmm_(t, ad, 1.0, p.scale);
        if (need_d) {
          torch::Tensor db = d_bd[ei], da = d_ad.narrow(0, ei * rd, rd);
          at::mm_out(db, dye.t(), ha.narrow(0, o, n)).mul_(p.scale);
          at::mm_out(da, t.t(), he).mul_(p.scale);
        }
      }
      if (ctx->needs_input_grad(1 + 2 * ne + e)) d_w[2 * ne + e] = torch::mm(dye.t(), he);
      // SwiGLU: h = silu(g) u.
      const torch::Tensor g = gue.narrow(1, 0, f), u = gue.narrow(1, f, f);
      const torch::Tensor sg = torch::sigmoid(g);
      torch::Tensor dgu = torch::empty({n, 2 * f}, opts);
      torch::Tensor dg = dgu.narrow(1, 0, f), du = dgu.narrow(1, f, f);
      at::mul_out(du, dh, g * sg);
      at::mul_out(dg, dh, u).mul_((1.0 - sg).mul_(g).add_(1.0).mul_(sg));
      // Gate and up: dx = dgu W_gu + s (dgu B_gu) A_gu.
      if (need_x) {
        torch::Tensor dxe = dx.narrow(0, o, n);
        if (!p.fused.empty()) {
          at::mm_out(dxe, dgu, p.fused[e]);
        } else {
          at::mm_out(dxe, dg, weight(0, e));
          dxe.addmm_(du, weight(1, e));
        }
      }
      if (rg > 0) {
        const torch::Tensor ag = a_gu.narrow(0, ei * rg, rg);
        const torch::Tensor t = torch::mm(dgu, bg[ei]);  // (n, Rg)
        if (need_x) dx.narrow(0, o, n).addmm_(t, ag, 1.0, p.scale);
        if (need_gu) {
          torch::Tensor db = d_bg[ei], da = d_agu.narrow(0, ei * rg, rg);
          at::mm_out(db, dgu.t(), xa.narrow(0, o, n)).mul_(p.scale);
          at::mm_out(da, t.t(), xe).mul_(p.scale);
        }
      }
      if (ctx->needs_input_grad(1 + e)) d_w[e] = torch::mm(dg.t(), xe);
      if (ctx->needs_input_grad(1 + ne + e)) d_w[ne + e] = torch::mm(du.t(), xe);
    });
    // PEFT's B layout back: (E, out, R) -> (out, R, E) -> (out, R*E).
    const auto peft_b = [](const torch::Tensor& d) {
      return d.defined() ? d.permute({1, 2, 0}).reshape({d.size(1), -1}) : d;
    };
    tensor_list out{dx};
    out.insert(out.end(), d_w.begin(), d_w.end());
    out.insert(out.end(), {d_agu, peft_b(d_bg), d_ad, peft_b(d_bd), torch::Tensor()});
    return out;
  }
};

}  // namespace

bool ExpertGateUpFused(const LlamaLayer& l, size_t i) {
  if (i >= l.expert_gate_up.size() || !l.expert_gate_up[i].defined()) return false;
  const torch::Tensor &f = l.expert_gate_up[i], &g = l.expert_gate[i], &u = l.expert_up[i];
  return !g.requires_grad() && !u.requires_grad() && g.is_alias_of(f) && u.is_alias_of(f) &&
         g.storage_offset() == f.storage_offset() &&
         u.storage_offset() == f.storage_offset() + g.size(0) * f.stride(0);
}

bool ExpertsOnThreadsApply(const torch::Tensor& x, const LlamaLayer& l) {
  if (!x.device().is_cpu() || x.scalar_type() != torch::kFloat32 || l.expert_down.empty()) return false;
  for (const auto* list : {&l.expert_gate, &l.expert_up, &l.expert_down})
    for (const torch::Tensor& w : *list)
      if (!w.device().is_cpu() || w.scalar_type() != torch::kFloat32) return false;
  for (const auto& [name, pair] : l.expert_lora)
    if (pair.a.scalar_type() != torch::kFloat32 || pair.b.scalar_type() != torch::kFloat32) return false;
  return true;
}

torch::Tensor ExpertsOnThreads(const torch::Tensor& xs, const std::vector<int64_t>& counts,
                               const LlamaLayer& l, double lora_scale) {
  std::vector<torch::Tensor> fused;
  bool all_fused = true;
  for (size_t e = 0; e < l.expert_down.size(); ++e) all_fused = all_fused && ExpertGateUpFused(l, e);
  if (all_fused) fused = l.expert_gate_up;
  const auto pair = [&](const char* which) -> const LoraPair* {
    auto it = l.expert_lora.find(which);
    return lora_scale > 0.0 && it != l.expert_lora.end() ? &it->second : nullptr;
  };
  const LoraPair *gu = pair("gate_up"), *dn = pair("down");
  Plan plan = MakePlan(counts, std::move(fused), lora_scale);
  if (!torch::GradMode::is_enabled()) {  // decoding, prefill: nothing to save, no graph node
    const torch::Tensor none;
    return Forward(xs, l.expert_gate, l.expert_up, l.expert_down, gu != nullptr ? gu->a : none,
                   gu != nullptr ? gu->b : none, dn != nullptr ? dn->a : none, dn != nullptr ? dn->b : none,
                   plan)
        .y;
  }
  using Opt = std::optional<torch::Tensor>;
  return ExpertsFn::apply(xs, at::TensorList(l.expert_gate), at::TensorList(l.expert_up),
                          at::TensorList(l.expert_down), gu != nullptr ? Opt(gu->a) : Opt(),
                          gu != nullptr ? Opt(gu->b) : Opt(), dn != nullptr ? Opt(dn->a) : Opt(),
                          dn != nullptr ? Opt(dn->b) : Opt(), plan);
}

}  // namespace burst
