// `burst sweep create|get|list|cancel`: sweeps (one job body fanned out over
// a grid of values) from the command line (docs/api.md, "Sweeps").
// `create --wait` and `get --watch` redraw the sweep's table in place on a
// terminal and print a line per change otherwise; --json prints the API's
// JSON.
//
// Thread-safety: registers subcommands; runs on the main thread.
#pragma once

namespace CLI {
class App;
}

namespace burst {

void AddSweepCommands(CLI::App& app, int* rc);

}  // namespace burst
