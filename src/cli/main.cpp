#include <cstring>
#include <initializer_list>

#include "cli/commands.h"
#include "core/alloc.h"
#include "model/cpu_threads.h"

int main(int argc, char** argv) {
  // The commands that run the model get passive OpenMP waiting (cpu_threads.h).
  if (argc > 1) {
    for (const char* cmd : {"train", "eval", "sample", "worker"})
      if (std::strcmp(argv[1], cmd) == 0) burst::EnsurePassiveOpenMpWait(argv);
  }
  burst::TuneAllocator();
  return burst::RunCli(argc, argv);
}
