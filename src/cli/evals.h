// Evaluations as jobs on a Burst server (docs/api.md, "Evaluations"):
// `burst eval --remote` and `burst evals create|get|list`.
#pragma once

#include <cstdint>
#include <string>

#include "cli/api_client.h"

namespace CLI {
class App;
}

namespace burst {

struct RemoteEvalArgs {
  ApiTarget target;
  std::string model, data;  // data: a file id, or a local JSONL file to upload
  int64_t max_seq_len = 512, batch_size = 8;
  bool wait = true, json = false;
};

// Creates the evaluation (uploading a local file first), waits for it with
// wait, and prints it; the process exit code.
int RemoteEval(const RemoteEvalArgs& a);

void AddEvalsCommands(CLI::App& app, int* rc);

}  // namespace burst
