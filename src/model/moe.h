// A mixture-of-experts MLP (Qwen 3 MoE, Mixtral), as transformers computes
// it: a router's softmax over the experts, the top k per token (weights
// renormalised to sum to 1 when asked), each picked expert's SwiGLU on the
// token, and the outputs summed by weight.
//
// Grouped by expert, never looped by token: the (token, choice) pairs are
// sorted by expert (stably), each expert's rows go through its projections
// as one GEMM, and the weighted outputs are added back to their tokens in
// expert order (the order transformers adds them in). On the CPU in float32
// the experts run on the threads with a backward of their own
// (moe_experts.h); elsewhere autograd gives theirs. The router's gradient
// comes through the picked weights. One token without autograd (decoding
// one sequence) skips the grouping: its K experts run in expert order, with
// the same bits.
//
// Thread-safety: a pure function of its arguments.
#pragma once

#include <torch/torch.h>

#include <vector>

#include "model/llama.h"

namespace burst {

// x (..., C) -> (..., C), through layer `l`'s router and experts, `k` per
// token; with `lora_scale` > 0 the experts' LoRA (LlamaLayer::expert_lora)
// adds scale * x A_e^T B_e^T to each projection it covers. `choices`, when
// given, gets the experts picked, (tokens, K) int64.
torch::Tensor SparseMoe(const torch::Tensor& x, const LlamaLayer& l, int64_t k, bool norm_topk,
                        std::vector<torch::Tensor>* choices = nullptr, double lora_scale = 0.0);

}  // namespace burst
