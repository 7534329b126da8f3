// For the e2e tests on a real Slurm: what Burst's jobs in Slurm's queue are,
// and the variables Slurm workers must get to compute like local ones.
#pragma once

#include <string>
#include <vector>

#include "core/subprocess.h"

extern char** environ;

namespace burst::e2e {

// Burst's jobs in Slurm's queue that have not ended, one "name STATE" a line.
inline std::string LiveSlurmJobs() {
  auto r = RunCommand({"squeue", "--noheader", "--format=%j %T"}, 10'000);
  return r.ok() ? r.value().out : "(squeue: " + r.status().ToString() + ")";
}

// Slurm's workers run with --export=NONE: the variables that choose
// OpenBLAS's kernels (and so the exact bytes) go with them as --worker-env,
// so both executors compute with the same kernels.
inline std::vector<std::string> WorkerEnvFlags() {
  std::vector<std::string> flags;
  for (char** e = environ; *e != nullptr; ++e) {
    std::string kv = *e;
    if (kv.rfind("OPENBLAS_", 0) == 0 || kv.rfind("OMP_", 0) == 0) flags.insert(flags.end(), {"--worker-env", kv});
  }
  return flags;
}

}  // namespace burst::e2e
