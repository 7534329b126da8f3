// AdamW and learning-rate schedules.
//
// AdamW follows torch.optim.AdamW (decoupled weight decay, bias-corrected
// moments) but keeps its moments as named tensors so a state checkpoint can
// store and restore them exactly.
//
// Thread-safety: one trainer thread. Errors: throw burst::Error.
#pragma once

#include <string>
#include <vector>

#include "model/safetensors.h"

namespace burst {

class AdamW {
 public:
  AdamW(NamedTensors params, double beta1, double beta2, double eps, double weight_decay);
  // New hyperparameters for the next updates (a training loop's optim_step
  // sends them with every call).
  void SetHyperparameters(double beta1, double beta2, double eps, double weight_decay) {
    beta1_ = beta1;
    beta2_ = beta2;
    eps_ = eps;
    weight_decay_ = weight_decay;
  }
  // One update from the parameters' .grad(); grads are left as they are.
  void Step(double lr);
  int64_t steps() const { return steps_; }
  // Moments as "exp_avg.<name>" / "exp_avg_sq.<name>".
  NamedTensors State() const;
  void LoadState(const TensorMap& state, int64_t steps);

 private:
  NamedTensors params_;
  std::vector<torch::Tensor> exp_avg_, exp_avg_sq_;
  double beta1_, beta2_, eps_, weight_decay_;
  int64_t steps_ = 0;
};

// Global L2 norm of the grads; scales them down to max_norm when above
// (max_norm 0 = no clipping). Returns the norm before clipping.
double ClipGradNorm(const std::vector<torch::Tensor>& params, double max_norm);

// Learning rate of update number `step` (1-based) of `total`.
// Warmup ramps linearly to `lr` over warmup steps (step/warmup); then
// constant, linear to 0, or cosine to 0 over the remaining steps.
double ScheduledLr(const std::string& kind, double lr, int64_t step, int64_t warmup, int64_t total);

}  // namespace burst
