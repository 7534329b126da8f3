// `burst jobs create|list|get|cancel|events|checkpoints`, `burst logs`,
// `burst workers` and `burst usage`: the fine-tuning jobs API from the
// command line (docs/api.md). Each talks only to the server, so it works
// after a job's workers are gone; --json prints the API's own JSON.
//
// Thread-safety: registers subcommands; runs on the main thread.
#pragma once

namespace CLI {
class App;
}

namespace burst {

void AddJobsCommands(CLI::App& app, int* rc);

}  // namespace burst
