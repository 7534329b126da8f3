// Helpers for train/ tests: a tiny random model folder with the fixture
// tokenizer, plus the model-free helpers of test_files.h.
#pragma once

#include "core/fs.h"
#include "model/hf_io.h"
#include "model/presets.h"
#include "model/tokenizer.h"
#include "train/test_files.h"

namespace burst::testing {

// A random `tiny` Llama with the fixture tokenizer, written as an HF folder.
inline fs::path MakeTinyModel(const fs::path& dir, uint64_t seed = 1, bool tied = false) {
  auto tok = LoadTokenizer(FixtureTokenizerDir());
  LlamaModel m = LlamaModel::Random(PresetConfig(tied ? "tiny-tied" : "tiny", tok->vocab_size()), seed);
  SaveModel(m, dir);
  CopyTokenizerFiles(FixtureTokenizerDir(), dir);
  return dir;
}

}  // namespace burst::testing
