// Activation checkpointing in training runs: the recipe field, the memory
// estimate and its choice, and whole runs with it on against runs without.
#include "train/activation_memory.h"

#include <gtest/gtest.h>

#include "core/fs.h"
#include "model/layer_recompute.h"
#include "model/presets.h"
#include "model/test_util.h"
#include "train/recipe.h"
#include "train/test_util.h"
#include "train/trainer.h"

namespace burst {
namespace {

namespace fs = std::filesystem;

TEST(ActivationMemory, EstimateGrowsWithTokensAndPaddingCostsTheScores) {
  const LlamaConfig c = PresetConfig("100m", 32000);
  const int64_t packed = EstimateActivationBytes(c, 2048, 2048, /*packed=*/true);
  EXPECT_EQ(EstimateActivationBytes(c, 4096, 2048, true), 2 * packed);
  const int64_t padded = EstimateActivationBytes(c, 2048, 2048, /*packed=*/false);
  // The (T, T) scores of 12 heads dwarf the rest at 2,048 tokens. Measured:
  // about 8.3 GB kept by a padded step of this shape (docs/bench.md).
  EXPECT_GT(padded, 4 * packed);
  EXPECT_GT(padded, 8'000'000'000);
  EXPECT_LT(padded, 10'000'000'000);
}

TEST(ActivationMemory, TheRecipeDecidesElseTheFreeMemory) {
  const LlamaConfig c = PresetConfig("100m", 32000);
  const int64_t need = EstimateActivationBytes(c, 8 * 512, 512, true);
  EXPECT_TRUE(ChooseCheckpointing(true, c, 8, 512, true, 1LL << 40).on);
  EXPECT_FALSE(ChooseCheckpointing(false, c, 8, 512, true, 1).on);
  EXPECT_FALSE(ChooseCheckpointing(std::nullopt, c, 8, 512, true, need * 2).on);
  const CheckpointingChoice tight = ChooseCheckpointing(std::nullopt, c, 8, 512, true, need);
  EXPECT_TRUE(tight.on);
  EXPECT_NE(tight.why.find("GiB free"), std::string::npos) << tight.why;
  EXPECT_FALSE(ChooseCheckpointing(std::nullopt, c, 8, 512, true, -1).on) << "unknown free memory: off";
  EXPECT_GT(AvailableMemoryBytes(), 0) << "MemAvailable is readable on Linux";
}

// Recipes of 3 steps of 4 sequences on the fixture's model and data.
class CheckpointedRunTest : public testing::TrainRunTest {
 protected:
  Recipe Short(const std::string& extra) {
    Json j = Json::parse(R"({"max_steps": 3, "batch_size": 4})");
    j.merge_patch(Json::parse(extra));
    return MakeRecipe(j.dump());
  }
};

// The field: true, false or null (auto), echoed in recipe.json; anything
// else refused by name.
TEST_F(CheckpointedRunTest, RecipeFieldIsABooleanOrNull) {
  EXPECT_FALSE(Short("{}").activation_checkpointing.has_value());
  EXPECT_EQ(Short(R"({"activation_checkpointing": true})").activation_checkpointing, true);
  EXPECT_EQ(Short(R"({"activation_checkpointing": false})").ToJson()["activation_checkpointing"], false);
  EXPECT_TRUE(Short("{}").ToJson()["activation_checkpointing"].is_null());
  test_util::ExpectBurstError([&] { Short(R"({"activation_checkpointing": "auto"})"); },
                              Code::kInvalidArgument, {"activation_checkpointing"});
  EXPECT_EQ(Short(R"({"activation_checkpointing": true})").TrainingRelevant(), Short("{}").TrainingRelevant())
      << "a run resumes with it switched: it changes no bit of the result";
}

// LoRA with dropout (padded: dropout turns packing off), packed LoRA, full
// fine-tuning and DPO: the same state files, byte for byte, as without it.
TEST_F(CheckpointedRunTest, RunsGiveTheStateOfRunsWithoutIt) {
  const fs::path pref_file = WritePreferences();
  const std::vector<std::string> recipes = {
      R"({"lora": {"rank": 4, "dropout": 0.2}})",
      R"({"lora": {"rank": 4}})",
      R"({"method": "full", "learning_rate": 0.001})",
      R"({"loss": "dpo", "dpo_beta": 0.5, "train_file": ")" + pref_file.string() + R"("})",
  };
  for (size_t i = 0; i < recipes.size(); ++i) {
    SCOPED_TRACE(recipes[i]);
    Json on = Json::parse(recipes[i]), off = on;
    on["activation_checkpointing"] = true;
    off["activation_checkpointing"] = false;
    const std::string n = std::to_string(i);
    const int64_t before = CheckpointedLayerCount();
    const TrainResult a = Train(Short(off.dump()), dir_ / ("off" + n));
    EXPECT_EQ(CheckpointedLayerCount(), before);
    const TrainResult b = Train(Short(on.dump()), dir_ / ("on" + n));
    EXPECT_GT(CheckpointedLayerCount(), before) << "the run checkpointed its layers";
    EXPECT_FALSE(a.activation_checkpointing);
    EXPECT_TRUE(b.activation_checkpointing);
    ExpectSameState(a, b);
    const Json info = Json::parse(ReadFile(b.sampler_dir / "run.json"));
    EXPECT_EQ(info["activation_checkpointing"], true);
  }
}

}  // namespace
}  // namespace burst
