// The command line with the model engine (`burst-engine`, which `burst`
// hands the engine's commands to: cli/front.h): every subcommand, their
// flags and their output.
//
// Every subcommand has --help with defaults; those that print results take
// --json. Errors from any layer arrive here as burst::Error (or any
// exception) and leave as one line on stderr and a non-zero exit code:
// 1 for errors, 2 for usage, 128+signal when training was interrupted
// (130 SIGINT, 143 SIGTERM).
//
// Thread-safety: runs on the main thread.
#pragma once

namespace burst {

int RunCli(int argc, char** argv);

}  // namespace burst
