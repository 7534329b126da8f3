// What a training run does with its folder and its state besides training
// (train/trainer.cpp): durations as the progress line shows them, a base
// model with tensors of its own, metrics cut back to a resumed step, and
// the checks a resume makes (the recipe's differences, the BLAS kernels).
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>

#include "core/json.h"
#include "model/llama.h"

namespace burst {

// "1h02m", "3m05s", "42s".
std::string FormatDuration(double s);
// A base model whose tensors are this run's own (a full fine-tune updates
// them in place, so a cached model's are cloned).
LlamaModel CloneWeights(const LlamaModel& m);
// Keeps metrics lines with step <= `step`; rewrites the file atomically.
void TruncateMetrics(const std::filesystem::path& path, int64_t step);
// The keys of `a` that `b` lacks or holds otherwise: "key (b -> a), ...".
std::string DescribeDiff(const Json& a, const Json& b);
// Refuses to resume, on the CPU, from the state in `dir` (its state.json
// `st`) when this process computes with another BLAS library or other
// kernels than it was written with; each error names the field and says
// how to get the recorded one.
void CheckSameBlas(const Json& st, const std::filesystem::path& dir);

}  // namespace burst
