// Helpers for train/ tests: a tiny random model folder with the fixture
// tokenizer, plus the model-free helpers of test_files.h.
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/fs.h"
#include "model/hf_io.h"
#include "model/presets.h"
#include "model/tokenizer.h"
#include "train/recipe.h"
#include "train/test_files.h"
#include "train/trainer.h"

namespace burst::testing {

// A random `tiny` Llama with the fixture tokenizer, written as an HF folder.
inline fs::path MakeTinyModel(const fs::path& dir, uint64_t seed = 1, bool tied = false) {
  auto tok = LoadTokenizer(FixtureTokenizerDir());
  LlamaModel m = LlamaModel::Random(PresetConfig(tied ? "tiny-tied" : "tiny", tok->vocab_size()), seed);
  SaveModel(m, dir);
  CopyTokenizerFiles(FixtureTokenizerDir(), dir);
  return dir;
}

// A fixture for runs of the trainer: a temporary folder with a tiny model
// and the first 24 support tickets; recipes on them, 1 thread on the CPU.
class TrainRunTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = MakeTempDir("burst-trainer-");
    model_ = MakeTinyModel(dir_ / "model");
    train_ = WriteLines(dir_ / "train.jsonl", HeadLines("examples/support/train.jsonl", 24));
  }
  void TearDown() override { fs::remove_all(dir_); }

  // The base recipe (threads 1, cpu, learning_rate 0.01) with `extra` merged in.
  Recipe MakeRecipe(const std::string& extra) {
    Json j = Json::parse(R"({"model": ")" + model_.string() + R"(", "train_file": ")" + train_.string() +
                         R"(", "threads": 1, "device": "cpu", "learning_rate": 0.01})");
    j.merge_patch(Json::parse(extra));
    return Recipe::Parse(j, dir_, "recipe");
  }

  // Eight preference pairs (prompt, chosen, rejected) in DIR/pref.jsonl.
  fs::path WritePreferences() {
    std::vector<std::string> lines;
    for (int i = 0; i < 8; ++i)
      lines.push_back(R"({"prompt":"Ticket )" + std::to_string(i) +
                      R"(: where is my parcel?","chosen":" shipping","rejected":" billing"})");
    return WriteLines(dir_ / "pref.jsonl", lines);
  }

  // The same final state files, byte for byte.
  static void ExpectSameState(const TrainResult& a, const TrainResult& b) {
    for (const char* f : {"trainable.safetensors", "optimizer.safetensors"})
      EXPECT_EQ(Sha256File(a.state_dir / f), Sha256File(b.state_dir / f)) << f;
  }

  fs::path dir_, model_, train_;
};

}  // namespace burst::testing
