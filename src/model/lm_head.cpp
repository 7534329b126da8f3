// The LM head and the log-probability of each target, with a hand-written
// backward.
//
// Autograd through linear -> log_softmax -> gather keeps or allocates four
// (N, V) buffers per step (logits, log-softmax output, the zero-filled
// gather gradient and the log-softmax gradient), and its index_select
// backward adds rows one at a time. Here the forward keeps only the
// log-softmax, and the backward turns that same buffer into d logp / d logits
// in place:
//   d logp_i / d logits_ij = [j == target_i] - softmax_ij
// so one (N, V) buffer serves the whole step.
#include "core/status.h"
#include "model/llama.h"

namespace burst {

// ----------------------------------------------------------------------------
// forward and backward

namespace {

using torch::autograd::AutogradContext;
using torch::autograd::tensor_list;

class TargetLogProbFn : public torch::autograd::Function<TargetLogProbFn> {
 public:
  // hidden (M, C), head (V, C), rows (N) int64 (a row may repeat, with
  // another target), targets (N) int64 -> log p(targets) (N)
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& hidden, const torch::Tensor& head,
                               const torch::Tensor& rows, const torch::Tensor& targets) {
    // The head's dtype computes the logits (bfloat16 for a frozen bfloat16
    // base on the GPU), the log-softmax and gradients stay float32.
    torch::Tensor h = hidden.index_select(0, rows).to(head.scalar_type());  // (N, C)
    // log_softmax is one fused pass per row; logsumexp would be five.
    torch::Tensor logp_all = torch::log_softmax(torch::mm(h, head.t()).to(torch::kFloat32), 1);  // (N, V)
    torch::Tensor logp = logp_all.gather(1, targets.unsqueeze(1)).squeeze(1);                    // (N)
    ctx->save_for_backward({h, head, rows, targets, logp_all});
    ctx->saved_data["hidden_rows"] = hidden.size(0);
    ctx->saved_data["hidden_dtype"] = hidden.scalar_type();
    ctx->saved_data["consumed"] = false;
    return logp;
  }

  static tensor_list backward(AutogradContext* ctx, tensor_list grads) {
    // The saved log-softmax becomes the gradient in place, so a second backward
    // through the same graph (retain_graph) would read garbage: refuse it.
    if (ctx->saved_data["consumed"].toBool()) {
      throw Error(Code::kInternal, "TargetLogProbFn: backward ran twice on one graph");
    }
    ctx->saved_data["consumed"] = true;
    auto saved = ctx->get_saved_variables();
    const torch::Tensor &h = saved[0], &head = saved[1], &rows = saved[2], &targets = saved[3];
    torch::Tensor d = saved[4];                  // (N, V) log-softmax
    torch::Tensor g = grads[0].unsqueeze(1);     // (N, 1)
    d.exp_().mul_(-g);                           // -g softmax
    d.scatter_add_(1, targets.unsqueeze(1), g);  // + g at the target
    torch::Tensor d_hidden, d_head;
    const auto dt = head.scalar_type();
    if (dt != d.scalar_type()) d = d.to(dt);
    if (ctx->needs_input_grad(0)) {
      const int64_t m = ctx->saved_data["hidden_rows"].toInt();
      const auto hidden_dtype = ctx->saved_data["hidden_dtype"].toScalarType();
      d_hidden = torch::zeros({m, h.size(1)}, h.options().dtype(hidden_dtype))
                     .index_add_(0, rows, torch::mm(d, head).to(hidden_dtype));  // (M, C)
    }
    if (ctx->needs_input_grad(1)) d_head = torch::mm(d.t(), h);  // (V, C)
    return {d_hidden, d_head, torch::Tensor(), torch::Tensor()};
  }
};

}  // namespace

// ----------------------------------------------------------------------------
// the loss-position entry point

torch::Tensor RowTargetLogProbs(const LlamaModel& model, const torch::Tensor& hidden,
                                const torch::Tensor& rows, const torch::Tensor& targets, torch::Tensor* hit) {
  torch::Tensor flat_h = hidden.reshape({-1, hidden.size(-1)}).to(torch::kFloat32);  // (M, C)
  const torch::Tensor head = model.HeadWeight();                                     // (V, C)
  const bool needs_grad = torch::GradMode::is_enabled() && (flat_h.requires_grad() || head.requires_grad());
  torch::Tensor logp;
  if (needs_grad) logp = TargetLogProbFn::apply(flat_h, head, rows, targets);  // (N)
  if (!needs_grad || hit) {
    torch::NoGradGuard no_grad;
    torch::Tensor logits = torch::mm(flat_h.index_select(0, rows).to(head.scalar_type()), head.t())
                               .to(torch::kFloat32);  // (N, V)
    if (!needs_grad) logp = torch::log_softmax(logits, 1).gather(1, targets.unsqueeze(1)).squeeze(1);
    if (hit) *hit = logits.argmax(-1) == targets;  // (N)
  }
  return logp;
}

TargetLogProbs SelectedLogProbs(const LlamaModel& model, const torch::Tensor& hidden,
                                const torch::Tensor& targets, const torch::Tensor& weights, bool with_hits) {
  TargetLogProbs out;
  torch::Tensor flat_w = weights.reshape({-1});                         // (B*T)
  out.rows = flat_w.nonzero().reshape({-1});                            // (N)
  out.weights = flat_w.index_select(0, out.rows);                       // (N)
  torch::Tensor tgt = targets.reshape({-1}).index_select(0, out.rows);  // (N)
  out.logp = RowTargetLogProbs(model, hidden, out.rows, tgt, with_hits ? &out.hit : nullptr);
  return out;
}

}  // namespace burst
