// A mixture-of-experts layer's experts on rows already grouped by expert,
// forward and backward written out, the experts spread over the threads.
//
// Autograd through one GEMM per expert and projection runs the experts one
// after another, each small GEMM split over every thread, with a graph node
// per product. Here each thread takes the next expert (largest first) and
// runs its products on its own, forward and backward; the backward is one
// node for the layer's experts, their LoRA included.
//
// Float32 on the CPU (ExpertsOnThreadsApply); other devices and dtypes take
// the per-expert autograd path in moe.cpp.
//
// Thread-safety: a pure function of its arguments.
#pragma once

#include <torch/torch.h>

#include <vector>

#include "model/llama.h"

namespace burst {

// Whether expert i's gate and up are still the row blocks of its fused
// matrix (LlamaModel::FreezeBaseAs), and frozen: one GEMM computes both.
bool ExpertGateUpFused(const LlamaLayer& l, size_t i);

// Whether ExpertsOnThreads computes layer `l`'s experts on `x`.
bool ExpertsOnThreadsApply(const torch::Tensor& x, const LlamaLayer& l);

// xs (M, C): counts[0] rows for expert 0, then counts[1] for expert 1, ...
// -> (M, C): each row through its expert's SwiGLU, with the experts' LoRA
// (LlamaLayer::expert_lora, PEFT's layout) at `lora_scale` when > 0.
// Differentiable in xs, the experts' weights and their LoRA.
torch::Tensor ExpertsOnThreads(const torch::Tensor& xs, const std::vector<int64_t>& counts,
                               const LlamaLayer& l, double lora_scale);

}  // namespace burst
