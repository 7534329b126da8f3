// burst_bench batches (train_batches.cpp): a recipe's micro-batches for the
// real-data benchmark's peers.
#pragma once

#include <CLI/CLI.hpp>

namespace burst {

void AddBatchesCommand(CLI::App& app, int* rc);

}  // namespace burst
