// Trainer: runs a recipe into a run folder (CONTRACTS.md, "Run output").
//
// Owns the loop: data order, micro-batches and gradient accumulation, the
// loss (cross-entropy or DPO), AdamW and the schedule, metrics.jsonl, eval,
// checkpoints of both kinds, and exact resume. Everything that decides what
// a step computes is derived from (seed, step), so a run resumed from a state
// checkpoint replays the same steps bit for bit on the same device and
// thread count (DESIGN.md, invariant 4).
//
// SIGINT/SIGTERM while training: a state checkpoint is written at the next
// step boundary and Train returns with interrupted = true.
//
// Thread-safety: one Train call per process at a time (it sets torch's
// thread count and signal handlers). Errors: throw burst::Error.
#pragma once

#include <filesystem>
#include <functional>
#include <optional>
#include <string>

#include "core/json.h"
#include "train/eval.h"
#include "train/recipe.h"

namespace burst {

struct TrainOptions {
  bool resume = false;
  bool overwrite = false;
  bool progress = false;  // a progress bar on stderr
  // Testing hook: stop (as if signalled) after this step.
  std::optional<int64_t> stop_after_step;
  // Called with each line written to metrics.jsonl.
  std::function<void(const Json&)> on_metrics;
};

struct TrainResult {
  int64_t step = 0;
  int64_t total_steps = 0;
  bool interrupted = false;
  int signal = 0;  // the signal that interrupted it (0: none, or the testing hook)
  bool resumed = false;
  int64_t resumed_from = 0;
  std::filesystem::path sampler_dir;  // newest sampler checkpoint
  std::filesystem::path state_dir;    // newest state checkpoint
  std::optional<EvalResult> baseline;  // eval before training (step 0)
  std::optional<EvalResult> final_eval;
  double wall_s = 0;
  int threads = 0;
  std::string device;
};

TrainResult Train(const Recipe& recipe, const std::filesystem::path& out_dir,
                  const TrainOptions& options = {});

// Resolves the recipe's threads (0 = all cores) and device (auto).
int ResolveThreads(int64_t threads);
torch::Device ResolveDevice(const std::string& device);

// Newest state checkpoint whose manifest verifies; corrupt ones are reported
// on stderr by name and skipped. Returns -1 when there is none.
int64_t NewestValidState(const std::filesystem::path& run_dir);

}  // namespace burst
