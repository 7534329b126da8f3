#include "train/schedule.h"

#include <algorithm>
#include <utility>

namespace burst {

uint64_t SplitMix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

std::vector<size_t> EpochOrder(size_t n, uint64_t seed, int64_t epoch) {
  std::vector<size_t> order(n);
  for (size_t i = 0; i < n; ++i) order[i] = i;
  uint64_t state = SplitMix(seed ^ SplitMix(static_cast<uint64_t>(epoch) + 1));
  for (size_t i = n; i > 1; --i) {
    state = SplitMix(state);
    std::swap(order[i - 1], order[state % i]);
  }
  return order;
}

uint64_t StepSeed(uint64_t seed, int64_t step) {
  return SplitMix(SplitMix(seed) ^ (static_cast<uint64_t>(step) * 0x2545f4914f6cdd1dull));
}

std::vector<std::vector<size_t>> StepSchedule::MicroBatches(int64_t step) const {
  const int64_t per_epoch = StepsPerEpoch();
  const int64_t epoch = (step - 1) / per_epoch;
  const int64_t in_epoch = (step - 1) % per_epoch;
  const int64_t mb_per_epoch = MicroBatchesPerEpoch();
  std::vector<size_t> order = EpochOrder(static_cast<size_t>(items), seed, epoch);
  std::vector<std::vector<size_t>> micro;
  for (int64_t k = 0; k < micro_per_step; ++k) {
    const int64_t mb = in_epoch * micro_per_step + k;
    if (mb >= mb_per_epoch) break;
    std::vector<size_t> batch;
    for (int64_t i = mb * batch_size; i < std::min(items, (mb + 1) * batch_size); ++i)
      batch.push_back(order[static_cast<size_t>(i)]);
    micro.push_back(std::move(batch));
  }
  return micro;
}

}  // namespace burst
