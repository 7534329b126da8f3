// The CUDA caching allocator's peak memory (gpu_bench.h): the one file of
// the benchmark tool that includes CUDA's headers (c10/cuda needs
// cuda_runtime_api.h), built with BURST_CUDA when the build has them.
#include <cstdint>
#include <utility>

#ifdef BURST_CUDA
#include <c10/cuda/CUDACachingAllocator.h>
#endif

namespace burst {

std::pair<int64_t, int64_t> CudaPeakBytes() {
#ifdef BURST_CUDA
  const auto stats = c10::cuda::CUDACachingAllocator::getDeviceStats(0);
  // Entry 0 of each statistic is the aggregate over the allocator's pools.
  return {stats.allocated_bytes[0].peak, stats.reserved_bytes[0].peak};
#else
  return {-1, -1};
#endif
}

}  // namespace burst
