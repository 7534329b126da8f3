// Trainer: runs a recipe into a run folder (docs/recipe.md, "Run output").
//
// Owns the loop: data order, micro-batches and gradient accumulation, the
// loss (cross-entropy or DPO), AdamW and the schedule, metrics.jsonl, eval,
// checkpoints of both kinds, and exact resume. Everything that decides what
// a step computes is derived from (seed, step), so a run resumed from a state
// checkpoint replays the same steps bit for bit on the same device and
// thread count (docs/design.md, invariant 4).
//
// SIGINT/SIGTERM while training: a state checkpoint is written at the next
// step boundary and Train returns with interrupted = true. A worker asks the
// same of a run through TrainOptions::should_stop.
//
// Thread-safety: one Train call per process at a time (it sets torch's
// thread count and signal handlers). Errors: throw burst::Error.
#pragma once

#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "core/json.h"
#include "train/base_model_cache.h"
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
  // Where a long-lived worker keeps its base model warm between runs: the
  // tokenizer, base weights and base sha come from here instead of disk. The
  // cached tensors are never modified: LoRA shares them (frozen), a full
  // fine-tune trains a clone, DPO's reference shares them. Results are bit
  // for bit those of a run without it. nullptr: read the model from disk.
  BaseModelCache* models = nullptr;
  // What checkpoints call the base model (adapter_config.json's
  // base_model_name_or_path, state.json's base_model); "": its folder. A
  // worker that fetched the model from the store gives the control plane's
  // name for it, so its checkpoints match those of a run on that folder.
  std::string base_model_name;
  // Polled at each step boundary but the last, and once before the first
  // step; true stops the run as a signal does: a state checkpoint at that
  // boundary (none before the first step), then interrupted = stop_requested
  // = true. For cancels and preemption without signals.
  std::function<bool()> should_stop;
  // Called after each checkpoint folder (RUN/checkpoints/step-N, sampler and
  // state, both manifests committed and synced), before older ones are
  // pruned, so it can upload a complete folder. What it throws leaves Train.
  std::function<void(int64_t step, const std::filesystem::path& step_dir)> on_checkpoint;
  // One job on many members: this process is member `rank` of
  // `size`. A step then has grad_accum x size micro-batches, member r
  // computing the r-th run of grad_accum of them (its loss normalised by
  // the whole step's loss tokens), and `all_reduce` sums the flat gradients
  // (the step's loss and tokens after them) across the members before the
  // optimizer step: N members with grad_accum A train as one with grad_accum
  // N x A, up to float rounding, and every member holds the same weights.
  // What all_reduce fails with leaves Train as an Error.
  //
  // Only rank 0 evaluates (the others' metrics.jsonl has train lines only)
  // and, unless all_write_checkpoints, writes checkpoints: the others
  // resume from a copy of rank 0's state. Stopping is decided together:
  // each member's should_stop (and a signal to it) is a vote carried in the
  // step's all-reduce, and all members stop after the step in which any
  // voted, rank 0 writing the state checkpoint there; should_stop is not
  // polled before the first step. A state checkpoint records the members'
  // number: exact resume needs the same one.
  struct DataParallel {
    int rank = 0;
    int size = 1;
    std::function<Status(std::vector<float>& flat)> all_reduce;  // one call a step, on every member
    // Every member writes checkpoints to its own folder (each folder is
    // resumable by itself: `burst train --members`, tests).
    bool all_write_checkpoints = false;
    // 0: synchronous (BSP): gradients summed every step. K > 0: model
    // averaging (LambdaML's MA-SGD): each member steps its own optimizer on
    // its share's mean gradient; each step the members sum only the loss,
    // tokens and stop votes, and they average the trainable weights and the
    // AdamW moments every K steps, at every checkpoint and where they stop
    // (so a state checkpoint is every member's state, and resume is exact).
    int64_t average_every = 0;
    // When set, the run sums its flat gradients with this instead, as one
    // float32 tensor on its device (a gang on GPUs: NCCL reduces device
    // memory, and the gradients never pass through the host).
    std::function<Status(torch::Tensor& flat)> all_reduce_device = nullptr;
  };
  std::optional<DataParallel> data_parallel;
};

struct TrainResult {
  int64_t step = 0;
  int64_t total_steps = 0;
  bool interrupted = false;
  int signal = 0;               // the signal that interrupted it (0: none, should_stop or the testing hook)
  bool stop_requested = false;  // interrupted because should_stop returned true
  bool resumed = false;
  int64_t resumed_from = 0;
  std::filesystem::path sampler_dir;   // newest sampler checkpoint
  std::filesystem::path state_dir;     // newest state checkpoint
  std::optional<EvalResult> baseline;  // eval before training (step 0)
  std::optional<EvalResult> final_eval;
  double wall_s = 0;
  int64_t trainable_floats = 0;  // what a data-parallel step exchanges (its gradients)
  int threads = 0;
  std::string device;
  std::string base_dtype;                 // the frozen base's: "float32" or "bfloat16"
  bool activation_checkpointing = false;  // as chosen (activation_memory.h)
};

TrainResult Train(const Recipe& recipe, const std::filesystem::path& out_dir,
                  const TrainOptions& options = {});

// Resolves the recipe's threads (0 = all cores) and device (auto).
int ResolveThreads(int64_t threads);
torch::Device ResolveDevice(const std::string& device);
// The dtype a run's base is loaded in on `device` (Recipe::base_dtype):
// bfloat16 for a LoRA run on a GPU unless the recipe says float32, else
// float32; kFailedPrecondition naming base_dtype for bfloat16 on a CPU.
torch::ScalarType FrozenBaseDtype(const Recipe& recipe, torch::Device device);

// Newest state checkpoint whose manifest verifies; corrupt ones are reported
// on stderr by name and skipped. Returns -1 when there is none.
int64_t NewestValidState(const std::filesystem::path& run_dir);

}  // namespace burst
