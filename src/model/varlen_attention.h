// Causal attention over sequences packed end to end, each over its own keys,
// on the CPU: what a packed training or eval micro-batch runs.
//
// The matmul path (llama.cpp) lays the packed sequences out as (S, L),
// every sequence padded to the longest: its scores, mask and softmax are S x
// L x L per head, materialised several times per layer, and with a wide
// length spread (a 900-token answer beside 100-token ones) most of that is
// padding. A step of 16 chat examples then allocated and page-faulted
// gigabytes and spent most of its time in the kernel. Here each (sequence,
// key head) pair is one task: for each block of 32 queries, their scores
// over the keys they see (causal: 0..i), a row softmax, and the weighted sum
// of the values, written straight into the output; the backward recomputes
// the same probabilities (no (T, T) buffer is kept between forward and
// backward). Work is the sum of the sequences' own L^2 / 2, memory a few
// (32 x L) and (L x D) buffers per thread.
//
// Every output and gradient element takes its float32 operations in the same
// order whatever the thread count or the tasks' order (a task owns its
// sequence's rows of every output and gradient), so results are
// reproducible run to run, and exact resume holds.
//
// Thread-safety: stateless; safe to call from several threads.
#pragma once

#include <torch/torch.h>

#include <vector>

namespace burst {

// Whether VarlenCausalAttention runs on q: a float32 tensor on the CPU.
bool VarlenAttentionApplies(const torch::Tensor& q);

// q (H, N, D), k and v (KV, N, D), float32 on the CPU, H a multiple of KV
// (query heads h = g*R + j share key head g); seq_lens (each >= 1) sum to N.
// Token i of a sequence attends to tokens 0..i of the same sequence, scores
// scaled by `scale`. Returns (H, N, D); differentiable in q, k and v.
torch::Tensor VarlenCausalAttention(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                                    const std::vector<int64_t>& seq_lens, double scale);

}  // namespace burst
