// What a request asks of the accelerator: the `gpu` field of jobs, sweeps'
// jobs, evaluations and deployments, as Modal's `gpu=`. Absent or null: a
// CPU slot. Else a type ("h100", "a100-80gb", "l40s"; any case), a type
// with a count ("h100:2"), "any" (any GPU type, "any:2"), or a list of those
// in order of preference.
//
// A request no slot of the pool can ever give is refused (400 naming `gpu`
// and what the pool has), never run on a CPU instead. Today's pools have CPU
// slots only, so every request for a GPU is refused with that message.
//
// Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/json.h"

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

// Returns the first option the pool can give; kInvalidArgument naming
// `field` and what the pool has when it can give none.
GpuOption CheckGpuRequest(const GpuRequest& request, const SlotPool& pool, const std::string& field);

}  // namespace burst
