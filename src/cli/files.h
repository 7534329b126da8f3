// `burst files upload|list|get|content|delete`: the Files API from the
// command line (--json prints the API's own JSON).
//
// Thread-safety: registers subcommands; runs on the main thread.
#pragma once

namespace CLI {
class App;
}

namespace burst {

void AddFilesCommand(CLI::App& app, int* rc);

}  // namespace burst
