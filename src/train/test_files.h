// Helpers for train/ tests that need no model (and so no libtorch): the
// fixture tokenizer's folder and JSONL writers.
#pragma once

#include <fstream>
#include <string>
#include <vector>

#include "core/fs.h"

namespace burst::testing {

inline fs::path FixtureTokenizerDir() { return fs::path(BURST_SOURCE_DIR) / "tests/fixtures/tiny-bpe"; }

inline fs::path WriteLines(const fs::path& path, const std::vector<std::string>& lines) {
  std::ofstream out(path);
  for (const auto& l : lines) out << l << "\n";
  return path;
}

// The first n lines of a repository file.
inline std::vector<std::string> HeadLines(const std::string& rel, size_t n) {
  std::ifstream in(fs::path(BURST_SOURCE_DIR) / rel);
  std::vector<std::string> out;
  std::string line;
  while (out.size() < n && std::getline(in, line)) out.push_back(line);
  return out;
}

}  // namespace burst::testing
