// burst_bench's GPU side (scripts/gpu-check.sh): what the CPU subcommands in
// train_bench.cpp need on a device, and two subcommands of its own.
//
//   burst_bench parity --model DIR --out DIR [--batch-size 2 --seq-len 24 --rank 4 --seed 0]
//       The same LoRA model (B nonzero) and token batch on the CPU in float32,
//       on CUDA in float32 and on CUDA under bfloat16 autocast (base weights
//       bfloat16): base logits, loss and LoRA gradients of each written to
//       OUT/{cpu,cuda_fp32,cuda_bf16}.safetensors, the adapter to
//       OUT/adapter (bench/hf_peer.py parity compares Hugging Face + PEFT
//       with them); one JSON line with each CUDA variant's largest
//       differences from the CPU, relative to the CPU's largest magnitude,
//       and whether they are inside the bounds stated in docs/bench.md.
//   burst_bench resume --out DIR [--device cuda --steps 20 --stop-at 10 --deterministic]
//       A short LoRA run of the real trainer (`burst train`'s code) on the
//       shipped model and data, and the same run stopped at --stop-at and
//       resumed from its state checkpoint: the loss curve and whether the
//       resumed run's adapter is bit for bit the uninterrupted one's.
#pragma once

#include <torch/torch.h>

#include <CLI/CLI.hpp>
#include <optional>
#include <string>
#include <utility>

#include "core/json.h"

namespace burst {

// "cpu" or "cuda" (an error naming --device when this build or machine has none).
torch::Device BenchDevice(const std::string& device);
// Waits for the device's queued work (timing on CUDA).
void SyncDevice(torch::Device device);
// The CUDA caching allocator's peak allocated and reserved MiB on device 0
// since the process started: null on the CPU.
OrderedJson GpuPeakMemory(torch::Device device);
// The same in bytes (allocated, reserved); CUDA only (gpu_memory.cpp).
std::pair<int64_t, int64_t> CudaPeakBytes();

// Adds `parity` and `resume` to the tool; *rc receives their exit status.
void AddGpuCommands(CLI::App& app, int* rc);

}  // namespace burst
