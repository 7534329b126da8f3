// `burst serve`'s GPUs: which of the machine's (or the Slurm partition's)
// GPUs the scheduler may give workers (--gpus), and what one GPU-hour of
// each type costs (--price-per-hour), checked and set in the runtime's
// options.
//
// Thread-safety: called on the main thread while serve starts.
#pragma once

#include <map>
#include <string>

#include "runtime/gpu_slots.h"
#include "runtime/runtime.h"

namespace CLI {
class App;
}

namespace burst {

struct GpuArgs {
  std::string gpus = "all";  // all, none, or indices (local executor)
  std::string prices;        // "cpu=0.18,h100=3.95" per hour ("" = the defaults)
};

void AddGpuOptions(CLI::App& cmd, GpuArgs* args);

// The default price of one GPU-hour by type (what managed serverless GPUs
// list); a type not here needs --price-per-hour.
const std::map<std::string, double>& DefaultGpuHourPrices();

// Parses --price-per-hour: TYPE=PRICE items, comma-separated, each price a
// number >= 0 per hour; kInvalidArgument naming the flag and the item.
std::map<std::string, double> ParseHourPrices(const std::string& text);

// Sets ro.gpus to `available` as --gpus chooses (`slurm`: only all or
// none), ro.price_per_gpu_second for each type there (a type with no price
// is an error naming it), and, when --price-per-hour names cpu, the CPU
// slot's price.
void ApplyGpus(const GpuArgs& a, const std::vector<GpuSlot>& available, bool slurm, RuntimeOptions& ro);

}  // namespace burst
