// What a request asks of the accelerator: the `gpu` field of jobs, sweeps'
// jobs, evaluations and deployments, as Modal's `gpu=`. Absent or null: a
// CPU slot. Else a type ("h100", "a100-80gb", "l40s"; any case), a type
// with a count ("h100:2"), "any" (any GPU type, "any:2"), or a list of those
// in order of preference.
//
// A request no slot of the pool can ever give is refused (400 naming `gpu`
// and what the pool has), never run on a CPU instead; one the pool can give
// but not now waits in the queue (runtime.h).
//
// Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/json.h"
#include "core/status.h"
#include "runtime/gpu_slots.h"

namespace burst {

struct GpuOption {
  std::string type;  // lowercase; "any" for any type
  int64_t count = 1;
};

struct GpuRequest {
  std::vector<GpuOption> options;  // in order of preference; empty: no GPU
  bool Asks() const { return !options.empty(); }
};

inline constexpr int64_t kMaxGpusPerRequest = 8;
inline constexpr size_t kMaxGpuOptions = 8;

// `value` as the field `field`; kInvalidArgument naming it for anything but
// the forms above: a type of 1..32 letters, digits and '-', a count of 1..8,
// a list of 1..8 distinct options.
GpuRequest ParseGpuRequest(const Json& value, const std::string& field);

// The pool a request is checked against: its GPUs by type, and its CPU
// slots with their threads.
struct SlotPool {
  std::map<std::string, int64_t> gpus;
  int64_t cpu_slots = 0;
  int64_t threads_per_slot = 0;
};

// The pool of a list of GPUs beside `cpu_slots` CPU slots.
SlotPool PoolOf(const std::vector<GpuSlot>& gpus, int64_t cpu_slots, int64_t threads_per_slot);

// The claims the pool can give `workers` workers at once, each worker the
// option's count of GPUs, in the request's order ("any" becomes each type
// with enough, in the pool's order; repeats dropped); kInvalidArgument
// naming `field` and what the pool has when it can give none.
std::vector<DeviceClaim> ResolveGpuRequest(const GpuRequest& request, const SlotPool& pool, int64_t workers,
                                           const std::string& field);

// The text a spec stores for a request: ["h100:2", "any"] (null for none).
Json GpuRequestJson(const GpuRequest& request);

// A job's devices from its spec's "gpu" (empty: a CPU slot). When the pool
// can give none of them (it changed since the job was accepted), *out holds
// the request's named types anyway, so the job waits for them and never
// runs on a CPU, and the error says so.
Status TaskDevices(const Json& spec, const SlotPool& pool, int64_t workers, std::vector<DeviceClaim>* out);

}  // namespace burst
