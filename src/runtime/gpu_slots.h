// The GPUs a control plane schedules on: each one a slot of a type
// ("h100", "a100-80gb", "l40s"), beside its CPU slots. `burst serve
// --gpus all|none|0,1` chooses them among those the machine has (listed by
// nvidia-smi); on Slurm they are each partition's GPU GRES (sinfo).
//
// Thread-safety: pure functions, except DetectGpus, which runs nvidia-smi.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/status.h"

namespace burst {

struct GpuSlot {
  int64_t index = 0;  // the device's index as nvidia-smi numbers it; on Slurm, its ordinal within its type
  std::string type;   // GpuTypeFromName
  std::string name;   // as the device names itself ("NVIDIA H100 80GB HBM3")
  std::string uuid;   // "GPU-..." ("" on Slurm): what a worker is pinned to
};

// What a worker sits on: one CPU slot ("cpu"), or `count` GPUs of one type.
struct DeviceClaim {
  std::string type = "cpu";
  int64_t count = 1;
  bool gpu() const { return type != "cpu"; }
  // "cpu", "h100" or "h100:2"
  std::string Text() const { return !gpu() ? "cpu" : count == 1 ? type : type + ":" + std::to_string(count); }
  bool operator==(const DeviceClaim& o) const { return type == o.type && count == o.count; }
};

// The type a request names for a device: the product's short name,
// lowercase, as Modal's `gpu=` spells it ("NVIDIA H100 80GB HBM3" -> "h100",
// "NVIDIA A100-SXM4-80GB" -> "a100-80gb", "Tesla T4" -> "t4"); names outside
// the known families become their words joined by '-' ("NVIDIA GeForce RTX
// 4090" -> "rtx-4090"), at most 32 characters.
std::string GpuTypeFromName(const std::string& name);

// The lines of `nvidia-smi --query-gpu=index,uuid,name --format=csv,noheader`;
// kInvalidArgument naming the line for one that is not "INDEX, UUID, NAME".
Result<std::vector<GpuSlot>> ParseGpuListing(const std::string& text);

// The GPUs this machine has, as nvidia-smi lists them; none when nvidia-smi
// is not installed. A CUDA_VISIBLE_DEVICES of this process (indices or
// UUIDs) keeps only those it names.
Result<std::vector<GpuSlot>> DetectGpus();

// `--gpus`: "all" (every one in `seen`), "none", or device indices
// ("0,2"); kInvalidArgument naming --gpus for an index `seen` has not, or a
// repeated one.
Result<std::vector<GpuSlot>> ChooseGpus(const std::string& flag, const std::vector<GpuSlot>& seen);

// How many of each type.
std::map<std::string, int64_t> CountByType(const std::vector<GpuSlot>& gpus);

// "2 x h100, 1 x l40s" ("" for none).
std::string DescribeGpuCounts(const std::map<std::string, int64_t>& counts);
// The same of a list ("no GPUs" for none).
std::string DescribeGpus(const std::vector<GpuSlot>& gpus);

// The price of one second of `claim` (a CPU slot, or `count` GPUs of its
// type at the type's price per GPU-second); nullopt for a GPU type
// `per_gpu_second` has no price for.
std::optional<double> DevicePricePerSecond(const DeviceClaim& claim, double per_slot_second,
                                           const std::map<std::string, double>& per_gpu_second);

}  // namespace burst
