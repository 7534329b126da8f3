// Whether a training run checkpoints its layers' activations (recipe
// `activation_checkpointing`; ForwardOptions::checkpoint_layers): as the
// recipe says, or, left unset, when the activations autograd would keep
// for one micro-batch do not fit in the host memory this machine has free
// (the trainer leaves room for gradients and AdamW's moments first; a
// GPU's memory is not read).
//
// The estimate counts the float32 values a decoder layer saves for its
// backward per token (projections' inputs and outputs, norms, rotary,
// SwiGLU, per picked expert for a mixture) and, for micro-batches padded
// to a rectangle rather than packed, the attention's (T, T) scores per
// head. Calibrated on the 100m preset (docs/bench.md, "Activation
// checkpointing"); it is an estimate, so it decides with a margin.
//
// Thread-safety: pure functions, except AvailableMemoryBytes which reads
// /proc and the cgroup's files.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "model/config.h"

namespace burst {

// Bytes of activations one micro-batch keeps through every layer: `tokens`
// in all, in sequences of at most `longest`, packed end to end or padded.
int64_t EstimateActivationBytes(const LlamaConfig& c, int64_t tokens, int64_t longest, bool packed);

// Free memory: /proc/meminfo's MemAvailable, or less when this process's
// cgroup (v2) has a memory.max; -1 when neither can be read.
int64_t AvailableMemoryBytes();

struct CheckpointingChoice {
  bool on = false;
  std::string why;  // one line for the run's log
};

// `asked` when the recipe set it; else on when the estimate for
// micro-batches of `batch` sequences of up to `longest` tokens exceeds
// 80% of `available` (bytes; < 0: unknown, then off).
CheckpointingChoice ChooseCheckpointing(std::optional<bool> asked, const LlamaConfig& c, int64_t batch,
                                        int64_t longest, bool packed, int64_t available);

}  // namespace burst
