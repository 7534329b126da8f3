#include "cli/front.h"

#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <initializer_list>

#include "cli/control_commands.h"

namespace burst {

const std::vector<std::pair<std::string, std::string>>& EngineCommands() {
  static const std::vector<std::pair<std::string, std::string>> kCommands = {
      {"init-model", "Write a small random Hugging Face Llama folder from a preset"},
      {"train", "Fine-tune a model with a recipe (LoRA or full)"},
      {"eval", "Loss, token accuracy, exact match and label accuracy on a JSONL file (--remote: as a job)"},
      {"sample", "Sample text from a model or checkpoint"},
      {"tokenize", "Show the tokens a model sees"},
      {"export", "Merge an adapter into its base and write a plain HF folder, or a GGUF file"},
      {"data", "Inspect training data"},
      {"worker", "Run one worker (started by `burst serve`'s executor)"},
  };
  return kCommands;
}

bool ComputesWithOpenMp(const char* command) {
  for (const char* c : {"train", "eval", "sample", "worker"})
    if (std::strcmp(command, c) == 0) return true;
  return false;
}

namespace {

std::string EnginePath() {
  if (const char* env = std::getenv("BURST_ENGINE"); env != nullptr && *env != '\0') return env;
  std::error_code ec;
  const std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", ec);
  return ((ec ? std::filesystem::path(".") : self.parent_path()) / "burst-engine").string();
}

// Replaces this process with the engine running the same command line
// (argv[0] too, so its usage lines say `burst`).
int ExecEngine(char** argv) {
  const std::string engine = EnginePath();
  ::execv(engine.c_str(), argv);
  std::fprintf(stderr,
               "burst: error: cannot run the model engine %s: %s (install burst-engine beside burst, or set "
               "BURST_ENGINE)\n",
               engine.c_str(), std::strerror(errno));
  return 127;
}

}  // namespace

int RunFront(int argc, char** argv) {
  if (argc > 1) {
    for (const auto& [name, help] : EngineCommands()) {
      if (name == argv[1]) return ExecEngine(argv);
    }
  }
  CLI::App app{"Burst: serverless fine-tuning that a team runs itself"};
  app.set_version_flag("--version", std::string("burst ") + BURST_VERSION);
  app.require_subcommand(1);
  int rc = 0;
  // Listed in the help; argv[1] naming one never reaches the parser.
  for (const auto& [name, help] : EngineCommands()) app.add_subcommand(name, help)->allow_extras();
  AddControlCommands(app, &rc);
  return ParseAndRun(app, argc, argv, rc);
}

}  // namespace burst
