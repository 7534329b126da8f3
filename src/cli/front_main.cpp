// `burst`: the control plane and the API and operator commands; the
// engine's commands go to `burst-engine` (cli/front.h).
#include <csignal>

#include "cli/front.h"
#include "core/alloc.h"

int main(int argc, char** argv) {
  // A peer that closes a connection while Burst writes to it is an error to
  // handle (EPIPE), not a reason to die silently (SIGPIPE).
  std::signal(SIGPIPE, SIG_IGN);
  burst::TuneAllocator();
  return burst::RunFront(argc, argv);
}
