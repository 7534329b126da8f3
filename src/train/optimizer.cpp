#include "train/optimizer.h"

#include <cmath>

#include "core/status.h"

namespace burst {

AdamW::AdamW(NamedTensors params, double beta1, double beta2, double eps, double weight_decay)
    : params_(std::move(params)), beta1_(beta1), beta2_(beta2), eps_(eps), weight_decay_(weight_decay) {
  for (auto& [name, p] : params_) {
    exp_avg_.push_back(torch::zeros_like(p, torch::MemoryFormat::Contiguous));
    exp_avg_sq_.push_back(torch::zeros_like(p, torch::MemoryFormat::Contiguous));
  }
}

void AdamW::Step(double lr) {
  torch::NoGradGuard no_grad;
  ++steps_;
  const double bc1 = 1.0 - std::pow(beta1_, static_cast<double>(steps_));
  const double bc2_sqrt = std::sqrt(1.0 - std::pow(beta2_, static_cast<double>(steps_)));
  const double step_size = lr / bc1;
  // Over all the tensors with a gradient at once: multi-tensor kernels on the
  // GPU (a few launches a step instead of eight per tensor, which for a
  // LoRA's hundreds of adapters is what the step would wait on); on the CPU
  // the same ops tensor by tensor, so the arithmetic, and its rounding, is
  // the per-tensor update's:
  //   p *= 1 - lr wd; m = b1 m + (1 - b1) g; v = b2 v + (1 - b2) g^2;
  //   p -= lr / bc1 * m / (sqrt(v) / sqrt(bc2) + eps)
  std::vector<torch::Tensor> ps, gs, m, v;
  for (size_t i = 0; i < params_.size(); ++i) {
    torch::Tensor g = params_[i].second.grad();
    if (!g.defined()) continue;
    ps.push_back(params_[i].second);
    gs.push_back(g);
    m.push_back(exp_avg_[i]);
    v.push_back(exp_avg_sq_[i]);
  }
  if (ps.empty()) return;
  if (weight_decay_ != 0.0) at::_foreach_mul_(ps, 1.0 - lr * weight_decay_);
  at::_foreach_mul_(m, beta1_);
  at::_foreach_add_(m, gs, 1.0 - beta1_);
  at::_foreach_mul_(v, beta2_);
  at::_foreach_addcmul_(v, gs, gs, 1.0 - beta2_);
  std::vector<torch::Tensor> denom = at::_foreach_sqrt(v);
  at::_foreach_div_(denom, bc2_sqrt);
  at::_foreach_add_(denom, eps_);
  at::_foreach_addcdiv_(ps, m, denom, -step_size);
}

NamedTensors AdamW::State() const {
  NamedTensors out;
  for (size_t i = 0; i < params_.size(); ++i) {
    out.emplace_back("exp_avg." + params_[i].first, exp_avg_[i]);
    out.emplace_back("exp_avg_sq." + params_[i].first, exp_avg_sq_[i]);
  }
  return out;
}

void AdamW::LoadState(const TensorMap& state, int64_t steps) {
  torch::NoGradGuard no_grad;
  for (size_t i = 0; i < params_.size(); ++i) {
    for (auto [prefix, dst] : {std::pair{"exp_avg.", &exp_avg_[i]}, {"exp_avg_sq.", &exp_avg_sq_[i]}}) {
      auto it = state.find(prefix + params_[i].first);
      if (it == state.end() || !it->second.sizes().equals(dst->sizes())) {
        throw Error(Code::kDataLoss,
                    "optimizer state lacks or misshapes " + std::string(prefix) + params_[i].first);
      }
      dst->copy_(it->second);
    }
  }
  steps_ = steps;
}

double ClipGradNorm(const std::vector<torch::Tensor>& params, double max_norm) {
  torch::NoGradGuard no_grad;
  double sq = 0.0;
  if (!params.empty() && params[0].is_cuda()) {
    // One wait for the device, not one per tensor.
    std::vector<torch::Tensor> parts;
    for (const auto& p : params)
      if (p.grad().defined()) parts.push_back(p.grad().pow(2).sum().to(torch::kFloat64));
    if (!parts.empty()) sq = torch::stack(parts).sum().item<double>();
  } else {
    for (const auto& p : params)
      if (p.grad().defined()) sq += p.grad().pow(2).sum().item<double>();
  }
  double norm = std::sqrt(sq);
  if (max_norm > 0.0 && norm > max_norm) {
    double coef = max_norm / (norm + 1e-6);
    for (const auto& p : params)
      if (p.grad().defined()) p.grad().mul_(coef);
  }
  return norm;
}

double ScheduledLr(const std::string& kind, double lr, int64_t step, int64_t warmup, int64_t total) {
  if (warmup > 0 && step <= warmup) return lr * static_cast<double>(step) / static_cast<double>(warmup);
  if (kind == "constant") return lr;
  const double span = static_cast<double>(std::max<int64_t>(1, total - warmup));
  const double done = static_cast<double>(step - 1 - warmup);  // updates after warmup so far
  const double progress = std::min(1.0, std::max(0.0, done / span));
  if (kind == "linear") return lr * (1.0 - progress);
  return lr * 0.5 * (1.0 + std::cos(M_PI * progress));  // cosine
}

}  // namespace burst
