// Activation checkpointing: a decoder layer that keeps only its input for
// the backward, and computes its activations again there.
//
// The forward runs the layer without autograd; the backward runs it again
// with autograd from the saved input (the dropout masks drawn again from
// the generator state the forward started from) and back-propagates
// through that, so parameters get the gradients they get without it, bit
// for bit. Peak memory then holds one layer's activations instead of all
// of them; the time is one more forward of every layer.
//
// Thread-safety: as LayerForward (llama_layer.h); the backward sets the
// forward's generator state for the recomputation and puts the current one
// back after.
#pragma once

#include <torch/torch.h>

#include "model/llama.h"
#include "model/llama_layer.h"

namespace burst {

// LayerForward(m, li, x, in, no cache, opt), checkpointed. `m` must outlive
// the backward.
torch::Tensor CheckpointedLayer(const LlamaModel& m, size_t li, const torch::Tensor& x, const LayerInputs& in,
                                const ForwardOptions& opt);

// How many layer forwards this process has run checkpointed (tests see
// from it whether a run checkpointed at all).
int64_t CheckpointedLayerCount();

}  // namespace burst
