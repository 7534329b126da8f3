// The CUDA caching allocator's peak memory (gpu_bench.h), through c10's
// device-generic allocator interface: no CUDA header is needed, so every
// build compiles it; on a machine without a GPU it is never called.
#include <c10/core/CachingDeviceAllocator.h>

#include <cstdint>
#include <utility>

namespace burst {

std::pair<int64_t, int64_t> CudaPeakBytes() {
  const auto stats = c10::getDeviceAllocator(c10::DeviceType::CUDA)->getDeviceStats(0);
  // Entry 0 of each statistic is the aggregate over the allocator's pools.
  return {stats.allocated_bytes[0].peak, stats.reserved_bytes[0].peak};
}

}  // namespace burst
