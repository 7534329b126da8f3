// Operator commands on a server's data folder: `burst orgs create|list` and
// `burst keys create|list|revoke`. They open DATA/meta.db directly (beside a
// running `burst serve`; SQLite's WAL mode allows both), so only someone with
// access to the data folder can mint keys.
//
// Thread-safety: registers subcommands; runs on the main thread.
#pragma once

namespace CLI {
class App;
}

namespace burst {

void AddAdminCommands(CLI::App& app, int* rc);

}  // namespace burst
