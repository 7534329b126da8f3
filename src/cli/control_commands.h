// The commands that need no model engine: the control plane (`serve`),
// the API clients (files, jobs, sweep, deployments, evals, logs, workers,
// usage, cost, models list) and the operator commands on a data folder
// (orgs, keys, models add). The `burst` binary runs these itself and
// hands the engine's commands (init-model, train, eval, sample, tokenize,
// export, data, worker) to `burst-engine` beside it (cli/front.cpp), so
// that the control plane and the clients start without loading libtorch.
//
// Thread-safety: registers subcommands; runs on the main thread.
#pragma once

namespace CLI {
class App;
}

namespace burst {

// Adds every command above to `app`; callbacks set *rc to the exit code.
void AddControlCommands(CLI::App& app, int* rc);

// Parses argv into `app` and runs the chosen command: rc, or CLI11's exit
// code for usage errors and --help, or 1 with "burst: error: ..." on stderr
// for anything thrown.
int ParseAndRun(CLI::App& app, int argc, char** argv, const int& rc);

}  // namespace burst
