// Running a command line tool and reading what it prints (the Slurm
// executor's sbatch, squeue and scancel).
#pragma once

#include <string>
#include <vector>

#include "core/status.h"

namespace burst {

struct CommandResult {
  int exit_code = -1;  // the exit status; 128 + N for a signal N
  std::string out;     // standard output, at most `max_output` bytes
  std::string err;     // standard error, at most `max_output` bytes
};

// Runs argv[0] (looked up in PATH) with argv, standard input from
// /dev/null and `env` as the environment (empty: ours), and waits for it at
// most `timeout_ms`, after which it is killed (SIGKILL) and the result is
// kUnavailable naming the command. A command that cannot be started is
// kUnavailable too; its exit code is the caller's to judge. Output beyond
// `max_output` bytes per stream is read and dropped.
Result<CommandResult> RunCommand(const std::vector<std::string>& argv, int64_t timeout_ms,
                                 const std::vector<std::string>& env = {}, size_t max_output = 1 << 20);

// "sbatch --parsable x.sh" for error messages.
std::string CommandLine(const std::vector<std::string>& argv);

}  // namespace burst
