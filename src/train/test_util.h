// Helpers for train/ tests: a tiny random model folder with the fixture
// tokenizer, and JSONL writers.
#pragma once

#include <fstream>
#include <string>
#include <vector>

#include "core/fs.h"
#include "model/hf_io.h"
#include "model/presets.h"
#include "model/tokenizer.h"

namespace burst::testing {

inline fs::path FixtureTokenizerDir() { return fs::path(BURST_SOURCE_DIR) / "tests/fixtures/tiny-bpe"; }

// A random `tiny` Llama with the fixture tokenizer, written as an HF folder.
inline fs::path MakeTinyModel(const fs::path& dir, uint64_t seed = 1, bool tied = false) {
  auto tok = LoadTokenizer(FixtureTokenizerDir());
  LlamaModel m = LlamaModel::Random(PresetConfig(tied ? "tiny-tied" : "tiny", tok->vocab_size()), seed);
  SaveModel(m, dir);
  CopyTokenizerFiles(FixtureTokenizerDir(), dir);
  return dir;
}

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
