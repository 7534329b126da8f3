#include "train/trainer.h"

#include <gtest/gtest.h>

#include "core/fs.h"
#include "model/safetensors.h"
#include "train/checkpoint.h"
#include "train/optimizer.h"
#include "train/test_util.h"

namespace burst {
namespace {

class TrainerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = MakeTempDir("burst-trainer-");
    model_ = testing::MakeTinyModel(dir_ / "model");
    train_ = testing::WriteLines(dir_ / "train.jsonl", testing::HeadLines("examples/support/train.jsonl", 24));
  }
  void TearDown() override { fs::remove_all(dir_); }

  Recipe MakeRecipe(const std::string& extra) {
    Json j = Json::parse(R"({"model": ")" + model_.string() + R"(", "train_file": ")" + train_.string() +
                         R"(", "threads": 1, "device": "cpu", "learning_rate": 0.01})");
    j.merge_patch(Json::parse(extra));
    return Recipe::Parse(j, dir_, "recipe");
  }

  std::vector<double> Losses(const fs::path& run) {
    std::vector<double> out;
    std::istringstream in(ReadFile(run / "metrics.jsonl"));
    std::string line;
    while (std::getline(in, line)) {
      Json j = Json::parse(line);
      if (j["type"] == "train") out.push_back(j["train_loss"].get<double>());
    }
    return out;
  }

  fs::path dir_, model_, train_;
};

TEST_F(TrainerTest, LossGoesDownOnRepeatedData) {
  // Full fine-tuning: a random tiny model's LM head is too small for LoRA
  // on the body alone to move the loss far.
  Recipe r = MakeRecipe(R"({"method": "full", "epochs": 8, "batch_size": 8})");
  TrainResult res = Train(r, dir_ / "run");
  EXPECT_EQ(res.step, 24);
  auto losses = Losses(dir_ / "run");
  ASSERT_EQ(losses.size(), 24u);
  EXPECT_LT(losses.back(), losses.front() * 0.5) << losses.front() << " -> " << losses.back();
  EXPECT_TRUE(VerifyManifest(res.sampler_dir, "hf-llama").ok());
  EXPECT_TRUE(VerifyManifest(res.state_dir, "burst-state").ok());
}

TEST_F(TrainerTest, LoraLossGoesDown) {
  Recipe r = MakeRecipe(R"({"epochs": 4, "batch_size": 8, "lora": {"rank": 8, "alpha": 16}})");
  TrainResult res = Train(r, dir_ / "run");
  auto losses = Losses(dir_ / "run");
  ASSERT_EQ(losses.size(), 12u);
  EXPECT_LT(losses.back(), losses.front() - 0.3) << losses.front() << " -> " << losses.back();
  EXPECT_TRUE(VerifyManifest(res.sampler_dir, "peft-lora").ok());
}

TEST_F(TrainerTest, GradAccumulationEqualsOneBigBatch) {
  TrainResult big = Train(MakeRecipe(R"({"max_steps": 3, "batch_size": 8, "grad_accum": 1})"), dir_ / "big");
  TrainResult acc = Train(MakeRecipe(R"({"max_steps": 3, "batch_size": 2, "grad_accum": 4})"), dir_ / "acc");
  auto lb = Losses(dir_ / "big"), la = Losses(dir_ / "acc");
  ASSERT_EQ(lb.size(), la.size());
  for (size_t i = 0; i < lb.size(); ++i) EXPECT_NEAR(lb[i], la[i], 1e-5 * std::abs(lb[i])) << "step " << i + 1;
  TensorMap wb = ReadSafetensors(big.state_dir / "trainable.safetensors");
  TensorMap wa = ReadSafetensors(acc.state_dir / "trainable.safetensors");
  for (auto& [name, t] : wb) {
    double scale = std::max(t.abs().max().item<double>(), 1e-6);
    EXPECT_LT((t - wa.at(name)).abs().max().item<double>() / scale, 1e-4) << name;
  }
}

TEST_F(TrainerTest, StopAndResumeIsBitExact) {
  std::string extra = R"({"max_steps": 6, "batch_size": 4, "lora": {"dropout": 0.2}, "checkpoint_every": 2,
                          "schedule": {"kind": "cosine", "warmup_steps": 2}})";
  TrainResult whole = Train(MakeRecipe(extra), dir_ / "whole");
  TrainOptions stop;
  stop.stop_after_step = 3;
  TrainResult part = Train(MakeRecipe(extra), dir_ / "split", stop);
  EXPECT_TRUE(part.interrupted);
  EXPECT_EQ(part.step, 3);
  TrainOptions resume;
  resume.resume = true;
  TrainResult rest = Train(MakeRecipe(extra), dir_ / "split", resume);
  EXPECT_EQ(rest.resumed_from, 3);
  EXPECT_EQ(rest.step, 6);
  for (const char* f : {"trainable.safetensors", "optimizer.safetensors"})
    EXPECT_EQ(Sha256File(whole.state_dir / f), Sha256File(rest.state_dir / f)) << f;
  EXPECT_EQ(Losses(dir_ / "whole"), Losses(dir_ / "split"));
}

TEST_F(TrainerTest, DpoPrefersChosen) {
  std::vector<std::string> lines;
  for (int i = 0; i < 8; ++i)
    lines.push_back(R"({"prompt":"Ticket )" + std::to_string(i) + R"(: where is my parcel?","chosen":" shipping","rejected":" billing"})");
  fs::path pref = testing::WriteLines(dir_ / "pref.jsonl", lines);
  Recipe r = MakeRecipe(R"({"loss": "dpo", "dpo_beta": 0.5, "epochs": 6, "batch_size": 4})");
  r.train_file = pref.string();
  Train(r, dir_ / "dpo");
  auto losses = Losses(dir_ / "dpo");
  EXPECT_NEAR(losses.front(), std::log(2.0), 1e-4);  // policy == reference at step 1
  EXPECT_LT(losses.back(), 0.3);
}

TEST(Schedule, WarmupThenDecay) {
  EXPECT_DOUBLE_EQ(ScheduledLr("linear", 1.0, 1, 4, 10), 0.25);
  EXPECT_DOUBLE_EQ(ScheduledLr("linear", 1.0, 4, 4, 10), 1.0);
  EXPECT_DOUBLE_EQ(ScheduledLr("linear", 1.0, 5, 4, 10), 1.0);
  EXPECT_NEAR(ScheduledLr("linear", 1.0, 10, 4, 10), 1.0 / 6.0, 1e-12);
  EXPECT_DOUBLE_EQ(ScheduledLr("constant", 0.5, 9, 0, 10), 0.5);
  EXPECT_NEAR(ScheduledLr("cosine", 1.0, 6, 0, 10), 0.5, 1e-12);
}

TEST(AdamW, MatchesTorchAdamW) {
  torch::manual_seed(0);
  torch::Tensor p0 = torch::randn({5, 3});
  torch::Tensor a = p0.clone().set_requires_grad(true), b = p0.clone().set_requires_grad(true);
  AdamW ours({{"w", a}}, 0.9, 0.95, 1e-8, 0.1);
  torch::optim::AdamW theirs({b}, torch::optim::AdamWOptions(0.01).betas({0.9, 0.95}).eps(1e-8).weight_decay(0.1));
  for (int step = 0; step < 5; ++step) {
    torch::Tensor g = torch::randn({5, 3});
    a.mutable_grad() = g.clone();
    b.mutable_grad() = g.clone();
    ours.Step(0.01);
    theirs.step();
  }
  EXPECT_LT((a - b).abs().max().item<double>(), 1e-6);
}

}  // namespace
}  // namespace burst
