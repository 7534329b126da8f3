// BlasFacts: what decides a CPU worker's numbers besides its slot's threads.
#pragma once

#include <string>

namespace burst {

// The BLAS library libtorch computes with and OpenBLAS's kernels, as a
// worker reports them when it registers and a job's state checkpoints
// record them (empty: unknown, e.g. reported by an older worker). A state
// checkpoint resumes exactly only where both are the same
// (train/trainer.cpp refuses others).
struct BlasFacts {
  std::string library;  // "OpenBLAS 0.3.21 NO_LAPACKE DYNAMIC_ARCH NO_AFFINITY MAX_THREADS=64"
  std::string kernels;  // "Haswell"
  bool known() const { return !library.empty() || !kernels.empty(); }
  bool operator==(const BlasFacts&) const = default;
};

}  // namespace burst
