// `burst serve`: the control plane process (HTTP API over the embedded
// SQLite metadata and file:// object store under --data).
//
// Thread-safety: registers a subcommand; runs on the main thread.
#pragma once

namespace CLI {
class App;
}

namespace burst {

// Adds `serve` to `app`; its callback sets *rc to the exit code.
void AddServeCommand(CLI::App& app, int* rc);

}  // namespace burst
