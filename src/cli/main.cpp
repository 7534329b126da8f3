#include <csignal>

#include "cli/commands.h"
#include "cli/front.h"
#include "core/alloc.h"
#include "model/cpu_threads.h"

int main(int argc, char** argv) {
  // A peer that closes a connection while Burst writes to it (the server
  // refusing an upload from its headers, a worker's control plane going
  // away) is an error to handle, not a reason to die silently: writes then
  // fail with EPIPE instead of raising SIGPIPE.
  std::signal(SIGPIPE, SIG_IGN);
  // The commands that run the model on a libtorch with OpenBLAS get passive
  // OpenMP waiting and OpenBLAS kernels that fit the CPU (cpu_threads.h); on
  // PyPI's libtorch (MKL) this is a no-op.
  if (argc > 1 && burst::ComputesWithOpenMp(argv[1])) burst::EnsureCpuEnvironment(argv);
  burst::TuneAllocator();
  return burst::RunCli(argc, argv);
}
