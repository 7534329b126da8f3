// The order a run trains in: which examples each step's micro-batches hold.
//
// Everything derives from (seed, epoch) or (seed, step), so a run resumed
// from a state checkpoint, a member of a data-parallel job and a benchmark
// peer (burst_bench batches) all see the very same micro-batches.
//
// Thread-safety: stateless. Errors: none (callers validate the sizes).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace burst {

uint64_t SplitMix(uint64_t x);
// A permutation of 0..n-1 for the epoch (Fisher-Yates on SplitMix).
std::vector<size_t> EpochOrder(size_t n, uint64_t seed, int64_t epoch);
// The seed of a step's random draws (dropout).
uint64_t StepSeed(uint64_t seed, int64_t step);

// Items are dealt in epoch order into micro-batches of batch_size (the
// epoch's last one may be short); a step takes micro_per_step of them
// (grad_accum x members), the epoch's last step what is left.
struct StepSchedule {
  int64_t items = 0;
  int64_t batch_size = 1;
  int64_t micro_per_step = 1;
  uint64_t seed = 0;

  int64_t MicroBatchesPerEpoch() const { return (items + batch_size - 1) / batch_size; }
  int64_t StepsPerEpoch() const { return (MicroBatchesPerEpoch() + micro_per_step - 1) / micro_per_step; }
  // The micro-batches of step `step` (1-based), item indices in each.
  std::vector<std::vector<size_t>> MicroBatches(int64_t step) const;
};

}  // namespace burst
