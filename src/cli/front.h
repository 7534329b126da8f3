// `burst`: the command line as users run it. The control plane and the API
// and operator commands run here (cli/control_commands.h), in a binary
// without libtorch, so they start in milliseconds; the engine's commands
// (EngineCommands) are handed to `burst-engine`, the same command line with
// the model engine linked, by exec with the same arguments, so they behave
// as if run there (exit codes, signals, the process id a worker reports).
// The environment goes on unchanged: the engine sets what its libtorch needs
// (model/cpu_threads.h).
//
// The engine is BURST_ENGINE when set, else `burst-engine` in this binary's
// folder; a missing one is exit 127 naming the path and the variable.
//
// Thread-safety: runs on the main thread.
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace burst {

// The commands `burst` hands to the engine, with the line `burst --help`
// shows for each.
const std::vector<std::pair<std::string, std::string>>& EngineCommands();

// Whether `command` computes with libtorch's OpenMP pool (train, eval,
// sample, worker), and so wants passive OpenMP waiting.
bool ComputesWithOpenMp(const char* command);

int RunFront(int argc, char** argv);

}  // namespace burst
