#include "cli/commands.h"
#include "core/alloc.h"

int main(int argc, char** argv) {
  burst::TuneAllocator();
  return burst::RunCli(argc, argv);
}
