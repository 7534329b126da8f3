#include "train/trainer.h"

#include <gtest/gtest.h>

#include "core/fs.h"
#include "model/cpu_threads.h"
#include "model/hf_io.h"
#include "model/safetensors.h"
#include "model/test_util.h"
#include "train/base_model_cache.h"
#include "train/checkpoint.h"
#include "train/data.h"
#include "train/eval.h"
#include "train/optimizer.h"
#include "train/test_util.h"

namespace burst {
namespace {

class TrainerTest : public testing::TrainRunTest {
 protected:
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
};

// Deep copies of a model's base tensors, to check later that nothing wrote them.
std::vector<std::pair<std::string, torch::Tensor>> Snapshot(const LlamaModel& m) {
  std::vector<std::pair<std::string, torch::Tensor>> out;
  for (auto& [name, t] : m.BaseWeights()) out.emplace_back(name, t.clone());
  return out;
}

void ExpectUnchanged(const BaseModel& base,
                     const std::vector<std::pair<std::string, torch::Tensor>>& before) {
  auto now = base.model.BaseWeights();
  ASSERT_EQ(now.size(), before.size());
  for (size_t i = 0; i < now.size(); ++i) {
    EXPECT_TRUE(torch::equal(now[i].second, before[i].second)) << now[i].first;
    EXPECT_FALSE(now[i].second.requires_grad()) << now[i].first;
  }
  EXPECT_FALSE(base.model.lora.has_value());
  for (const auto& l : base.model.layers) EXPECT_TRUE(l.lora.empty());
  if (base.model.config.tie_word_embeddings) {
    EXPECT_TRUE(base.model.lm_head.is_same(base.model.embed));
  }
}

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
  for (size_t i = 0; i < lb.size(); ++i)
    EXPECT_NEAR(lb[i], la[i], 1e-5 * std::abs(lb[i])) << "step " << i + 1;
  TensorMap wb = ReadSafetensors(big.state_dir / "trainable.safetensors");
  TensorMap wa = ReadSafetensors(acc.state_dir / "trainable.safetensors");
  for (auto& [name, t] : wb) {
    double scale = std::max(t.abs().max().item<double>(), 1e-6);
    EXPECT_LT((t - wa.at(name)).abs().max().item<double>() / scale, 1e-4) << name;
  }
}

// Packing (the default) trains what padded batches train: the same loss
// curve and weights up to float rounding, and the recipe can turn it off.
TEST_F(TrainerTest, PackedBatchesTrainAsPaddedOnes) {
  const std::string base = R"({"max_steps": 4, "batch_size": 6, "lora": {"rank": 4, "alpha": 8}, )";
  EXPECT_TRUE(MakeRecipe(base + R"("seed": 0})").Packs());
  EXPECT_FALSE(MakeRecipe(base + R"("packing": false})").Packs());
  EXPECT_FALSE(MakeRecipe(R"({"lora": {"dropout": 0.1}})").Packs());
  EXPECT_TRUE(MakeRecipe(R"({"lora": {"dropout": 0.1}, "packing": true})").Packs());
  test_util::ExpectBurstError([&] { MakeRecipe(R"({"packing": "yes"})"); }, Code::kInvalidArgument,
                              {"packing"});
  TrainResult packed = Train(MakeRecipe(base + R"("packing": true})"), dir_ / "packed");
  TrainResult padded = Train(MakeRecipe(base + R"("packing": false})"), dir_ / "padded");
  auto lp = Losses(dir_ / "packed"), ld = Losses(dir_ / "padded");
  ASSERT_EQ(lp.size(), 4u);
  ASSERT_EQ(lp.size(), ld.size());
  for (size_t i = 0; i < lp.size(); ++i)
    EXPECT_NEAR(lp[i], ld[i], 1e-5 * std::abs(ld[i])) << "step " << i + 1;
  TensorMap wp = ReadSafetensors(packed.state_dir / "trainable.safetensors");
  TensorMap wd = ReadSafetensors(padded.state_dir / "trainable.safetensors");
  // AdamW's first steps move each weight by about lr whatever the size of
  // its gradient, so rounding-level differences in tiny gradients show in
  // the weights at 1e-5 (as with grad_accum, above); the gradients
  // themselves are compared below. The packed attention
  // (varlen_attention.h) rounds differently from the padded one's matmuls,
  // and lora_A's gradients start at exactly 0 (lora_B is zero), so after 4
  // steps a weight may differ by a few 1e-4 of the largest; a wrong
  // attention moves them by whole units.
  for (auto& [name, t] : wd) {
    double scale = std::max(t.abs().max().item<double>(), 1e-6);
    EXPECT_LT((t - wp.at(name)).abs().max().item<double>() / scale, 1e-3) << name;
  }
  EXPECT_EQ(Json::parse(ReadFile(dir_ / "packed" / "recipe.json"))["packing"], true);
}

// A micro-batch's loss and LoRA gradients, packed and padded, to 1e-5.
TEST_F(TrainerTest, PackedLossAndGradientsEqualPaddedOnes) {
  auto tok = LoadTokenizer(model_);
  Dataset data = LoadSupervised(train_, *tok, {});
  std::vector<const Example*> ptrs;
  for (size_t i = 0; i < 6; ++i) ptrs.push_back(&data.examples[i]);
  size_t shortest = 1 << 30, longest = 0;
  for (const Example* e : ptrs) {
    shortest = std::min(shortest, e->ids.size());
    longest = std::max(longest, e->ids.size());
  }
  ASSERT_LT(shortest, longest);  // padding to save, and to get wrong
  LlamaModel m = LoadModel(model_, torch::kCPU);
  LoraSpec spec;
  spec.rank = 4;
  m.AddLora(spec, 3);
  {
    torch::NoGradGuard no_grad;
    auto gen = at::make_generator<at::CPUGeneratorImpl>(4);
    for (auto& [name, slot] : m.LoraWeightSlots()) slot->normal_(0.0, 0.05, gen);
  }
  m.SetTrainable(false);
  auto run = [&](bool packed) {
    for (auto& [name, w] : m.LoraWeights()) w.mutable_grad() = torch::Tensor();
    ForwardOptions fo;
    PackedBatch b;
    if (packed) {
      b = MakePackedBatch(ptrs, torch::kCPU);
      fo.seq_lens = b.seq_lens;
    } else {
      static_cast<Batch&>(b) = MakeBatch(ptrs, torch::kCPU);
    }
    TargetLogProbs t = SelectedLogProbs(m, m.Hidden(b.inputs, nullptr, fo), b.targets, b.weights);
    torch::Tensor nll = -(t.logp * t.weights).sum();
    nll.backward();
    std::vector<torch::Tensor> out = {nll.detach()};
    for (auto& [name, w] : m.LoraWeights()) out.push_back(w.grad().clone());
    return out;
  };
  std::vector<torch::Tensor> padded = run(false), packed = run(true);
  ASSERT_EQ(padded.size(), packed.size());
  for (size_t i = 0; i < padded.size(); ++i) {
    EXPECT_LE(test_util::RelErr(packed[i], padded[i]), 1e-5)
        << (i == 0 ? "loss" : "gradient " + std::to_string(i));
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

// A state checkpoint written with another BLAS library (another OpenBLAS
// version or build: its GEMMs may round differently) is refused by name,
// and nothing is written; one from before the library was recorded (no
// "blas_library") still resumes, exactly.
TEST_F(TrainerTest, ResumeWithAnotherBlasLibraryIsRefusedAndNamed) {
  std::string extra = R"({"max_steps": 4, "batch_size": 4, "checkpoint_every": 2})";
  TrainResult whole = Train(MakeRecipe(extra), dir_ / "whole");
  Json info = ParseJson(ReadFile(whole.sampler_dir / "run.json"), "run.json");
  EXPECT_EQ(info.value("blas_library", "?"), BlasLibraryName()) << "the sampler folder records it for users";
  EXPECT_EQ(info.value("blas", "?"), BlasCoreName());
  TrainOptions stop;
  stop.stop_after_step = 2;
  TrainResult part = Train(MakeRecipe(extra), dir_ / "split", stop);
  ASSERT_EQ(part.step, 2);
  const fs::path state = part.state_dir;
  Json st = ParseJson(ReadFile(state / "state.json"), "state.json");
  EXPECT_EQ(st.value("blas_library", "?"), BlasLibraryName()) << "state.json records it";
  // Edited as another machine would have written it, its manifest made anew.
  auto rewrite = [&](const Json& changed) {
    WriteFileAtomic(state / "state.json", changed.dump(2) + "\n");
    CommitManifest(state, "burst-state", {{"step", 2}});
  };
  Json other = st;
  other["blas_library"] = "OpenBLAS 0.3.20 DYNAMIC_ARCH NO_AFFINITY MAX_THREADS=64";
  rewrite(other);
  TrainOptions resume;
  resume.resume = true;
  try {
    Train(MakeRecipe(extra), dir_ / "split", resume);
    ADD_FAILURE() << "resumed on another BLAS library";
  } catch (const Error& e) {
    EXPECT_EQ(e.status().code(), Code::kFailedPrecondition);
    EXPECT_EQ(e.status().param(), "blas_library");
    EXPECT_NE(e.status().message().find("OpenBLAS 0.3.20 DYNAMIC_ARCH"), std::string::npos)
        << e.status().message();
    EXPECT_NE(e.status().message().find(BlasLibraryName()), std::string::npos) << e.status().message();
  }
  EXPECT_EQ(ListCheckpointSteps(dir_ / "split"), (std::vector<int64_t>{2}))
      << "the refused resume wrote nothing";
  Json old = st;
  old.erase("blas_library");
  rewrite(old);
  TrainResult rest = Train(MakeRecipe(extra), dir_ / "split", resume);
  EXPECT_EQ(rest.resumed_from, 2);
  EXPECT_EQ(rest.step, 4);
  ExpectSameState(whole, rest);
}

TEST_F(TrainerTest, DpoPrefersChosen) {
  const fs::path pref = WritePreferences();
  Recipe r = MakeRecipe(R"({"loss": "dpo", "dpo_beta": 0.5, "epochs": 6, "batch_size": 4})");
  r.train_file = pref.string();
  Train(r, dir_ / "dpo");
  auto losses = Losses(dir_ / "dpo");
  EXPECT_NEAR(losses.front(), std::log(2.0), 1e-4);  // policy == reference at step 1
  EXPECT_LT(losses.back(), 0.3);
}

TEST_F(TrainerTest, CachedLoraRunsMatchUncachedAndLeaveTheBaseAlone) {
  BaseModelCache cache;
  auto base = cache.Get(model_, torch::kCPU);
  auto before = Snapshot(base->model);
  const std::vector<std::string> recipes = {
      R"({"max_steps": 3, "batch_size": 4})",
      R"({"max_steps": 3, "batch_size": 4, "seed": 7, "lora": {"rank": 4, "dropout": 0.2, "targets": ["q", "v"]}})"};
  TrainOptions cached;
  cached.models = &cache;
  for (size_t i = 0; i < recipes.size(); ++i) {
    std::string n = std::to_string(i);
    TrainResult plain = Train(MakeRecipe(recipes[i]), dir_ / ("plain" + n));
    TrainResult warm = Train(MakeRecipe(recipes[i]), dir_ / ("warm" + n), cached);
    ExpectSameState(plain, warm);
    EXPECT_EQ(Sha256File(plain.sampler_dir / "adapter_model.safetensors"),
              Sha256File(warm.sampler_dir / "adapter_model.safetensors"));
    EXPECT_EQ(Losses(dir_ / ("plain" + n)), Losses(dir_ / ("warm" + n)));
  }
  EXPECT_EQ(cache.loads(), 1);
  ASSERT_TRUE(cache.loaded().has_value());
  EXPECT_EQ(fs::weakly_canonical(*cache.loaded()), fs::weakly_canonical(model_));
  EXPECT_EQ(cache.Get(model_, torch::kCPU), base);  // still the one loaded first
  ExpectUnchanged(*base, before);
  // The checkpoints record the same base sha as a run that read the disk.
  Json st = ParseJson(ReadFile(dir_ / "warm0/checkpoints" / StepDirName(3) / "state/state.json"), "state");
  EXPECT_EQ(st["base_model_sha256"], base->sha256);
  EXPECT_EQ(base->sha256, BaseModelSha(model_));
}

TEST_F(TrainerTest, CachedFullFineTuneMatchesUncachedAndLeavesTheBaseAlone) {
  for (bool tied : {false, true}) {
    SCOPED_TRACE(tied ? "tied" : "untied");
    std::string t = tied ? "tied" : "untied";
    model_ = testing::MakeTinyModel(dir_ / ("model-" + t), 3, tied);
    BaseModelCache cache;
    auto base = cache.Get(model_, torch::kCPU);
    auto before = Snapshot(base->model);
    TrainOptions cached;
    cached.models = &cache;
    std::string extra = R"({"method": "full", "max_steps": 3, "batch_size": 4})";
    TrainResult plain = Train(MakeRecipe(extra), dir_ / ("plain-" + t));
    TrainResult warm = Train(MakeRecipe(extra), dir_ / ("warm-" + t), cached);
    ExpectSameState(plain, warm);
    EXPECT_EQ(Sha256File(plain.sampler_dir / "model.safetensors"),
              Sha256File(warm.sampler_dir / "model.safetensors"));
    ExpectUnchanged(*base, before);
    // A second full run from the same cache starts from the untouched base.
    TrainResult again = Train(MakeRecipe(extra), dir_ / ("again-" + t), cached);
    ExpectSameState(plain, again);
    EXPECT_EQ(cache.loads(), 1);
  }
}

TEST_F(TrainerTest, CachedDpoFullMatchesUncached) {
  const fs::path pref = WritePreferences();
  BaseModelCache cache;
  auto base = cache.Get(model_, torch::kCPU);
  auto before = Snapshot(base->model);
  TrainOptions cached;
  cached.models = &cache;
  Recipe r = MakeRecipe(R"({"loss": "dpo", "method": "full", "max_steps": 3, "batch_size": 4})");
  r.train_file = pref.string();
  TrainResult plain = Train(r, dir_ / "plain");
  TrainResult warm = Train(r, dir_ / "warm", cached);
  ExpectSameState(plain, warm);
  EXPECT_EQ(Losses(dir_ / "plain"), Losses(dir_ / "warm"));
  ExpectUnchanged(*base, before);
}

TEST(BaseModelCacheTest, ReloadsWhenAskedForAnotherFolderOrTheFilesChange) {
  fs::path dir = MakeTempDir("burst-cache-");
  fs::path a = testing::MakeTinyModel(dir / "a", 1), b = testing::MakeTinyModel(dir / "b", 2);
  BaseModelCache cache;
  EXPECT_FALSE(cache.loaded().has_value());
  auto first = cache.Get(a, torch::kCPU);
  EXPECT_EQ(cache.Get(dir / "b/../a", torch::kCPU), first);  // the same folder, spelt differently
  auto other = cache.Get(b, torch::kCPU);
  EXPECT_EQ(cache.loads(), 2);
  EXPECT_EQ(*cache.loaded(), b);
  EXPECT_NE(other->sha256, first->sha256);
  EXPECT_TRUE(torch::equal(first->model.embed, LoadModel(a).embed));  // a run holding it keeps it whole
  // Rewritten on disk: read again, with the new sha.
  testing::MakeTinyModel(b, 3);
  fs::last_write_time(b / "model.safetensors",
                      fs::last_write_time(b / "model.safetensors") + std::chrono::seconds(1));
  auto fresh = cache.Get(b, torch::kCPU);
  EXPECT_EQ(cache.loads(), 3);
  EXPECT_NE(fresh->sha256, other->sha256);
  EXPECT_EQ(fresh->sha256, BaseModelSha(b));
  // Another dtype of the frozen base is another model: loaded again, fused, frozen.
  auto half = cache.Get(b, torch::kCPU, torch::kBFloat16);
  EXPECT_EQ(cache.loads(), 4);
  EXPECT_EQ(half->dtype, torch::kBFloat16);
  for (const auto& [name, w] : half->model.BaseWeights())
    EXPECT_EQ(w.scalar_type(), torch::kBFloat16) << name;
  EXPECT_TRUE(half->model.layers[0].q_proj.is_alias_of(half->model.layers[0].qkv_proj));
  EXPECT_TRUE(torch::equal(half->model.embed, fresh->model.embed.to(torch::kBFloat16)));
  EXPECT_EQ(cache.Get(b, torch::kCPU, torch::kBFloat16), half);
  cache.Clear();
  EXPECT_FALSE(cache.loaded().has_value());
  EXPECT_THROW(cache.Get(dir / "missing", torch::kCPU), Error);
  EXPECT_FALSE(cache.loaded().has_value());
  fs::remove_all(dir);
}

// The frozen base's dtype: bfloat16 for LoRA on a GPU unless the recipe says
// float32; float32 for a full fine-tune and on the CPU; bfloat16 asked for
// on the CPU is refused naming base_dtype.
TEST(FrozenBaseDtypeTest, FollowsMethodDeviceAndRecipe) {
  Recipe lora, full, f32, bf16;
  full.method = "full";
  f32.base_dtype = "float32";
  bf16.base_dtype = "bfloat16";
  const torch::Device gpu(torch::kCUDA, 0);
  EXPECT_EQ(FrozenBaseDtype(lora, gpu), torch::kBFloat16);
  EXPECT_EQ(FrozenBaseDtype(bf16, gpu), torch::kBFloat16);
  EXPECT_EQ(FrozenBaseDtype(f32, gpu), torch::kFloat32);
  EXPECT_EQ(FrozenBaseDtype(full, gpu), torch::kFloat32);
  EXPECT_EQ(FrozenBaseDtype(lora, torch::kCPU), torch::kFloat32);
  try {
    FrozenBaseDtype(bf16, torch::kCPU);
    ADD_FAILURE() << "bfloat16 on the CPU was taken";
  } catch (const Error& e) {
    EXPECT_EQ(e.status().param(), "base_dtype");
  }
}

TEST_F(TrainerTest, ShouldStopCheckpointsAndResumesBitExact) {
  std::string extra = R"({"max_steps": 6, "batch_size": 4, "lora": {"dropout": 0.2}, "checkpoint_every": 2,
                          "schedule": {"kind": "cosine", "warmup_steps": 2}})";
  TrainResult whole = Train(MakeRecipe(extra), dir_ / "whole");
  int64_t last_step = 0, polls = 0;
  TrainOptions stop;
  stop.on_metrics = [&](const Json& j) {
    if (j["type"] == "train") last_step = j["step"].get<int64_t>();
  };
  stop.should_stop = [&] {
    ++polls;
    return last_step >= 3;
  };
  TrainResult part = Train(MakeRecipe(extra), dir_ / "split", stop);
  EXPECT_TRUE(part.interrupted);
  EXPECT_TRUE(part.stop_requested);
  EXPECT_EQ(part.signal, 0);
  EXPECT_EQ(part.step, 3);
  EXPECT_EQ(polls, 4);  // before step 1, then after steps 1..3
  EXPECT_EQ(part.state_dir, dir_ / "split/checkpoints" / StepDirName(3) / "state");
  EXPECT_TRUE(VerifyManifest(part.state_dir, "burst-state").ok());
  EXPECT_EQ(NewestValidState(dir_ / "split"), 3);
  TrainOptions resume;
  resume.resume = true;
  resume.should_stop = [] { return false; };
  TrainResult rest = Train(MakeRecipe(extra), dir_ / "split", resume);
  EXPECT_FALSE(rest.interrupted);
  EXPECT_FALSE(rest.stop_requested);
  EXPECT_EQ(rest.resumed_from, 3);
  EXPECT_EQ(rest.step, 6);
  ExpectSameState(whole, rest);
  EXPECT_EQ(Losses(dir_ / "whole"), Losses(dir_ / "split"));
}

TEST_F(TrainerTest, ShouldStopBeforeTheFirstStepSavesNothing) {
  TrainOptions stop;
  stop.should_stop = [] { return true; };
  TrainResult res = Train(MakeRecipe(R"({"max_steps": 2, "batch_size": 4})"), dir_ / "run", stop);
  EXPECT_TRUE(res.interrupted);
  EXPECT_TRUE(res.stop_requested);
  EXPECT_EQ(res.step, 0);
  EXPECT_TRUE(ListCheckpointSteps(dir_ / "run").empty());
}

TEST_F(TrainerTest, OnCheckpointSeesEachCommittedFolderBeforePruning) {
  std::vector<int64_t> steps;
  TrainOptions opt;
  opt.on_checkpoint = [&](int64_t step, const fs::path& step_dir) {
    steps.push_back(step);
    EXPECT_EQ(step_dir, dir_ / "run/checkpoints" / StepDirName(step));
    EXPECT_TRUE(VerifyManifest(step_dir / "sampler", "peft-lora").ok()) << step;
    EXPECT_TRUE(VerifyManifest(step_dir / "state", "burst-state").ok()) << step;
    // Not pruned yet: the previous checkpoint is still there with keep_last 1.
    if (steps.size() > 1) {
      EXPECT_TRUE(fs::exists(step_dir.parent_path() / StepDirName(steps[steps.size() - 2])));
    }
  };
  TrainResult res =
      Train(MakeRecipe(R"({"max_steps": 5, "batch_size": 4, "checkpoint_every": 2, "keep_last": 1})"),
            dir_ / "run", opt);
  EXPECT_EQ(steps, (std::vector<int64_t>{2, 4, 5}));
  EXPECT_EQ(ListCheckpointSteps(dir_ / "run"), (std::vector<int64_t>{5}));
  // What the hook throws leaves Train.
  TrainOptions failing;
  failing.overwrite = true;
  failing.on_checkpoint = [](int64_t, const fs::path&) { throw Error(Code::kUnavailable, "upload failed"); };
  EXPECT_THROW(Train(MakeRecipe(R"({"max_steps": 1, "batch_size": 4})"), dir_ / "run", failing), Error);
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
  torch::optim::AdamW theirs({b},
                             torch::optim::AdamWOptions(0.01).betas({0.9, 0.95}).eps(1e-8).weight_decay(0.1));
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
