// Exact resume, end to end (docs/recipe.md, "Run output"): a run that is killed
// (SIGKILL, at arbitrary points, possibly mid-checkpoint) or interrupted
// (SIGTERM: a state checkpoint at the next step boundary) and continued with
// `burst train --resume` ends bit-identical to an uninterrupted run: the same
// trainable weights, optimizer moments and adapter, and the same
// metrics.jsonl in every field except wall_s.
//
// Everything runs with threads 1 (the contract holds for equal thread counts).
#include <gtest/gtest.h>
#include <sys/stat.h>

#include "e2e_util.h"

namespace burst::e2e {
namespace {

ino_t Inode(const fs::path& p) {
  struct stat st {};
  if (::stat(p.c_str(), &st) != 0) return 0;
  return st.st_ino;
}

std::vector<int64_t> Range(int64_t from, int64_t to) {
  std::vector<int64_t> v;
  for (int64_t i = from; i <= to; ++i) v.push_back(i);
  return v;
}

class ResumeTest : public ::testing::Test {
 protected:
  // 42 examples, batch 4 x grad_accum 2: 11 micro-batches, so 6 steps per
  // epoch (the last one a single half-full micro-batch); 8 steps cross into
  // epoch 2 and its reshuffle.
  static constexpr int64_t kSteps = 8;
  static constexpr int64_t kStepsPerEpoch = 6;

  static void SetUpTestSuite() {
    tmp_ = new TempDir("burst-e2e-resume");
    fs::path root = tmp_->path();
    model_ = root / "model";
    ProcResult init = InitTinyModel(model_, 5);
    if (!init.ok()) {
      setup_error_ = "init-model failed: " + init.Describe();
      return;
    }
    WriteSupportSubset(root, 42, 12);
    recipe_ = root / "lora.json";
    WriteJsonFile(recipe_, LoraRecipe());
    a_ = root / "A";
    ProcResult r = RunBurst({"train", "--config", recipe_.string(), "--out", a_.string(), "--json"});
    if (!r.ok()) setup_error_ = "the uninterrupted LoRA run failed: " + r.Describe();
  }
  static void TearDownTestSuite() {
    delete tmp_;
    tmp_ = nullptr;
  }
  void SetUp() override {
    if (!setup_error_.empty()) FAIL() << setup_error_;
  }

  static Json LoraRecipe() {
    return {{"model", model_.string()},
            {"train_file", (tmp_->path() / "train.jsonl").string()},
            {"valid_file", (tmp_->path() / "valid.jsonl").string()},
            {"method", "lora"},
            {"lora", {{"rank", 4}, {"alpha", 8}, {"dropout", 0.1}}},
            {"learning_rate", 1e-3},
            {"optimizer", {{"weight_decay", 0.01}}},
            {"schedule", {{"kind", "cosine"}, {"warmup_steps", 2}}},
            {"batch_size", 4},
            {"grad_accum", 2},
            {"epochs", 2},
            {"max_steps", kSteps},
            {"checkpoint_every", 1},
            {"keep_last", 0},
            {"eval_every", 4},
            {"seed", 11},
            {"threads", 1}};
  }

  static fs::path NewDir(const std::string& name) {
    fs::path p = tmp_->path() / name;
    fs::remove_all(p);
    return p;
  }

  static Json ParseStdout(const ProcResult& r) {
    try {
      return Json::parse(r.out);
    } catch (const std::exception& e) {
      ADD_FAILURE() << "stdout is not JSON: " << e.what() << "\n" << r.Describe();
      return Json::object();
    }
  }

  static std::vector<std::string> TrainArgs(const fs::path& recipe, const fs::path& dir, bool resume) {
    std::vector<std::string> args = {"train", "--config", recipe.string(), "--out", dir.string(), "--json"};
    if (resume) args.push_back("--resume");
    return args;
  }

  // Runs until a train line with step >= `step` shows in dir/metrics.jsonl,
  // then SIGKILLs the process; returns the highest step seen at that point.
  static int64_t KillAtStep(const fs::path& recipe, const fs::path& dir, bool resume, int64_t step) {
    ProcResult r = RunBurstUntil(
        TrainArgs(recipe, dir, resume), [&] { return MaxTrainStep(dir) >= step; }, SIGKILL);
    EXPECT_TRUE(r.signal_sent) << "the run ended before step " << step << ": " << r.Describe();
    EXPECT_EQ(r.term_signal, SIGKILL) << r.Describe();
    return MaxTrainStep(dir);
  }

  // File `rel` of checkpoint `step` is byte-identical in runs x and y.
  static void ExpectSameFile(const fs::path& x, const fs::path& y, int64_t step, const std::string& rel) {
    fs::path fx = StepDir(x, step) / rel, fy = StepDir(y, step) / rel;
    ASSERT_TRUE(fs::is_regular_file(fx)) << fx;
    ASSERT_TRUE(fs::is_regular_file(fy)) << fy;
    EXPECT_EQ(Sha256File(fx), Sha256File(fy))
        << rel << " differs at step " << step << " between " << x << " and " << y;
  }

  static void ExpectSameMetrics(const fs::path& x, const fs::path& y) {
    bool okx = false, oky = false;
    ReadJsonLines(x / "metrics.jsonl", &okx);
    ReadJsonLines(y / "metrics.jsonl", &oky);
    EXPECT_TRUE(okx) << x / "metrics.jsonl"
                     << " has a line that does not parse";
    EXPECT_TRUE(oky) << y / "metrics.jsonl"
                     << " has a line that does not parse";
    std::vector<std::string> mx = MetricsWithoutWall(x), my = MetricsWithoutWall(y);
    EXPECT_EQ(mx.size(), my.size());
    for (size_t i = 0; i < std::min(mx.size(), my.size()); ++i)
      EXPECT_EQ(mx[i], my[i]) << "metrics.jsonl line " << i + 1 << " differs";
  }

  static inline TempDir* tmp_ = nullptr;
  static inline std::string setup_error_;
  static inline fs::path model_, recipe_, a_;
};

// The uninterrupted reference run is itself what the contract describes.
TEST_F(ResumeTest, UninterruptedRunIsComplete) {
  EXPECT_EQ(CheckpointSteps(a_), Range(1, kSteps)) << "keep_last 0 keeps every checkpoint";
  for (int64_t s : Range(1, kSteps)) {
    EXPECT_TRUE(ManifestMatches(StepDir(a_, s) / "state", "burst-state")) << "step " << s;
    EXPECT_TRUE(ManifestMatches(StepDir(a_, s) / "sampler", "peft-lora")) << "step " << s;
  }
  std::vector<Json> lines = ReadJsonLines(a_ / "metrics.jsonl");
  std::vector<int64_t> eval_steps;
  std::vector<Json> train;
  for (const auto& j : lines) {
    if (j["type"] == "eval") eval_steps.push_back(j["step"].get<int64_t>());
    if (j["type"] == "train") train.push_back(j);
  }
  EXPECT_EQ(eval_steps, (std::vector<int64_t>{0, 4, 8}));
  ASSERT_EQ(train.size(), static_cast<size_t>(kSteps));
  // Cosine with 2 warmup steps: up, then down.
  EXPECT_LT(train[0]["lr"].get<double>(), train[1]["lr"].get<double>());
  EXPECT_GT(train[2]["lr"].get<double>(), train[7]["lr"].get<double>());

  // `tokens` counts every non-padding token fed: after one epoch, the
  // file's tokens as `burst data check` counts them; likewise the loss tokens.
  ProcResult dc = RunBurst(
      {"data", "check", (tmp_->path() / "train.jsonl").string(), "--model", model_.string(), "--json"});
  ASSERT_TRUE(dc.ok()) << dc.Describe();
  Json check = ParseStdout(dc);
  EXPECT_EQ(train[kStepsPerEpoch - 1]["tokens"].get<int64_t>(), check["tokens"].get<int64_t>())
      << "tokens after epoch 1";
  double loss_tokens = 0;
  for (int64_t s = 0; s < kStepsPerEpoch; ++s) loss_tokens += train[s]["loss_tokens"].get<double>();
  EXPECT_EQ(static_cast<int64_t>(loss_tokens), check["loss_tokens"].get<int64_t>())
      << "loss tokens of epoch 1";
  EXPECT_GT(train[kSteps - 1]["tokens"].get<int64_t>(), train[kStepsPerEpoch - 1]["tokens"].get<int64_t>());
}

// SIGKILL three times (mid-step, mid-eval or mid-checkpoint), resume to the
// end: bit-identical to the uninterrupted run.
TEST_F(ResumeTest, LoraKilledRepeatedlyResumesBitExact) {
  fs::path b = NewDir("B");
  const int64_t seen1 = KillAtStep(recipe_, b, /*resume=*/false, 2);
  ASSERT_GE(seen1, 2);
  // Step 1's checkpoint was committed before step 2 started.
  ASSERT_TRUE(ManifestMatches(StepDir(b, 1) / "state", "burst-state"));
  const ino_t step1_manifest = Inode(StepDir(b, 1) / "state/manifest.json");

  const int64_t seen2 = KillAtStep(recipe_, b, /*resume=*/true, 5);
  ASSERT_GE(seen2, 5);
  // The resumed process continued from a checkpoint rather than starting over.
  EXPECT_EQ(Inode(StepDir(b, 1) / "state/manifest.json"), step1_manifest)
      << "the first resume rewrote step 1: it did not resume";
  ASSERT_TRUE(ManifestMatches(StepDir(b, 4) / "state", "burst-state"));

  // Third kill: as soon as the step-7 checkpoint folder appears, i.e. most
  // likely while it is being written (before its manifests are committed).
  ProcResult mid = RunBurstUntil(
      TrainArgs(recipe_, b, /*resume=*/true), [&] { return fs::exists(StepDir(b, 7)); }, SIGKILL);
  ASSERT_TRUE(mid.signal_sent) << "the run ended before writing step 7: " << mid.Describe();
  EXPECT_EQ(mid.term_signal, SIGKILL) << mid.Describe();
  RecordProperty("step7_state_committed_at_kill",
                 fs::exists(StepDir(b, 7) / "state/manifest.json") ? "yes" : "no");

  ProcResult last = RunBurst(TrainArgs(recipe_, b, /*resume=*/true));
  ASSERT_TRUE(last.ok()) << last.Describe();
  Json res = ParseStdout(last);
  EXPECT_EQ(res.value("step", int64_t{0}), kSteps) << last.out;
  EXPECT_EQ(res.value("interrupted", true), false) << last.out;
  ASSERT_TRUE(res.contains("resumed_from") && res["resumed_from"].is_number()) << last.out;
  EXPECT_GE(res["resumed_from"].get<int64_t>(), 6) << last.out;
  EXPECT_LT(res["resumed_from"].get<int64_t>(), kSteps) << last.out;

  EXPECT_EQ(CheckpointSteps(b), Range(1, kSteps));
  for (int64_t s : Range(1, kSteps)) {
    SCOPED_TRACE("step " + std::to_string(s));
    EXPECT_TRUE(ManifestMatches(StepDir(b, s) / "state", "burst-state"));
    EXPECT_TRUE(ManifestMatches(StepDir(b, s) / "sampler", "peft-lora"));
    ExpectSameFile(a_, b, s, "state/trainable.safetensors");
    ExpectSameFile(a_, b, s, "state/optimizer.safetensors");
    ExpectSameFile(a_, b, s, "sampler/adapter_model.safetensors");
  }
  ExpectSameMetrics(a_, b);
}

// SIGTERM: the run writes a state checkpoint at the next step boundary and
// exits (non-zero, "interrupted"); --resume continues from exactly there.
TEST_F(ResumeTest, SigtermCheckpointsAndResumesBitExact) {
  // Only the end is checkpointed on schedule, so the SIGTERM checkpoint is the
  // only one. checkpoint_every is not training-relevant: the result must still
  // match run A.
  Json recipe = LoraRecipe();
  recipe["checkpoint_every"] = 0;
  fs::path rpath = tmp_->path() / "lora-no-ckpt.json";
  WriteJsonFile(rpath, recipe);
  fs::path c = NewDir("C");

  ProcResult r = RunBurstUntil(
      TrainArgs(rpath, c, false), [&] { return MaxTrainStep(c) >= 3; }, SIGTERM);
  ASSERT_TRUE(r.signal_sent) << "the run ended before step 3: " << r.Describe();
  EXPECT_EQ(r.term_signal, 0) << "SIGTERM must be handled, not fatal: " << r.Describe();
  EXPECT_FALSE(r.timed_out);
  EXPECT_NE(r.exit_code, 0) << "an interrupted run must not look finished: " << r.Describe();
  Json res = ParseStdout(r);
  EXPECT_EQ(res.value("interrupted", false), true) << r.out;
  const int64_t k = res.value("step", int64_t{0});
  EXPECT_GE(k, 3) << r.out;
  ASSERT_LT(k, kSteps) << r.out;
  EXPECT_EQ(CheckpointSteps(c), (std::vector<int64_t>{k}))
      << "expected the one SIGTERM checkpoint at step " << k;
  EXPECT_TRUE(ManifestMatches(StepDir(c, k) / "state", "burst-state"));
  EXPECT_TRUE(ManifestMatches(StepDir(c, k) / "sampler", "peft-lora"));
  EXPECT_EQ(MaxTrainStep(c), k) << "no train line past the checkpointed step";
  ExpectSameFile(a_, c, k, "state/trainable.safetensors");
  ExpectSameFile(a_, c, k, "state/optimizer.safetensors");

  ProcResult rest = RunBurst(TrainArgs(rpath, c, true));
  ASSERT_TRUE(rest.ok()) << rest.Describe();
  Json done = ParseStdout(rest);
  EXPECT_EQ(done.value("resumed_from", Json()).dump(), std::to_string(k)) << rest.out;
  EXPECT_EQ(done.value("step", int64_t{0}), kSteps) << rest.out;
  EXPECT_EQ(CheckpointSteps(c), (std::vector<int64_t>{k, kSteps}));
  EXPECT_TRUE(ManifestMatches(StepDir(c, kSteps) / "state", "burst-state"));
  ExpectSameFile(a_, c, kSteps, "state/trainable.safetensors");
  ExpectSameFile(a_, c, kSteps, "state/optimizer.safetensors");
  ExpectSameFile(a_, c, kSteps, "sampler/adapter_model.safetensors");
  ExpectSameMetrics(a_, c);
}

// Full fine-tuning: every weight and both AdamW moments survive a kill.
TEST_F(ResumeTest, FullFineTuneKilledResumesBitExact) {
  Json recipe = LoraRecipe();
  recipe.erase("lora");
  recipe["method"] = "full";
  recipe["learning_rate"] = 1e-4;
  recipe["max_steps"] = 4;
  recipe["eval_every"] = 0;
  recipe["schedule"] = {{"kind", "cosine"}, {"warmup_steps", 1}};
  fs::path rpath = tmp_->path() / "full.json";
  WriteJsonFile(rpath, recipe);

  fs::path fa = NewDir("FA");
  ProcResult ra = RunBurst(TrainArgs(rpath, fa, false));
  ASSERT_TRUE(ra.ok()) << ra.Describe();

  fs::path fb = NewDir("FB");
  ASSERT_GE(KillAtStep(rpath, fb, /*resume=*/false, 2), 2);
  ProcResult rb = RunBurst(TrainArgs(rpath, fb, true));
  ASSERT_TRUE(rb.ok()) << rb.Describe();
  Json res = ParseStdout(rb);
  ASSERT_TRUE(res.contains("resumed_from") && res["resumed_from"].is_number()) << rb.out;
  EXPECT_GE(res["resumed_from"].get<int64_t>(), 1) << rb.out;
  EXPECT_EQ(res.value("step", int64_t{0}), 4) << rb.out;

  EXPECT_EQ(CheckpointSteps(fb), Range(1, 4));
  for (int64_t s : Range(1, 4)) {
    SCOPED_TRACE("step " + std::to_string(s));
    EXPECT_TRUE(ManifestMatches(StepDir(fb, s) / "state", "burst-state"));
    EXPECT_TRUE(ManifestMatches(StepDir(fb, s) / "sampler", "hf-llama"));
  }
  ExpectSameFile(fa, fb, 4, "state/trainable.safetensors");
  ExpectSameFile(fa, fb, 4, "state/optimizer.safetensors");
  ExpectSameFile(fa, fb, 4, "sampler/model.safetensors");
  ExpectSameMetrics(fa, fb);
}

// A recipe that changes what training computes cannot resume a run; one that
// changes only cadence (keep_last) can.
TEST_F(ResumeTest, ResumeWithAnotherLearningRateFailsNamingIt) {
  fs::path d = NewDir("D");
  fs::copy(a_, d, fs::copy_options::recursive);
  const std::string recipe_before = Slurp(d / "recipe.json");

  Json other = LoraRecipe();
  other["learning_rate"] = 2e-3;
  fs::path rpath = tmp_->path() / "lora-other-lr.json";
  WriteJsonFile(rpath, other);
  ProcResult r = RunBurst(TrainArgs(rpath, d, true));
  EXPECT_EQ(r.term_signal, 0) << r.Describe();
  EXPECT_NE(r.exit_code, 0) << r.Describe();
  EXPECT_TRUE(Contains(r.err, "learning_rate")) << r.Describe();
  // The run is left as it was.
  EXPECT_EQ(Slurp(d / "recipe.json"), recipe_before);
  EXPECT_EQ(CheckpointSteps(d), Range(1, kSteps));
  EXPECT_TRUE(ManifestMatches(StepDir(d, kSteps) / "state", "burst-state"));
  ExpectSameMetrics(a_, d);

  Json cadence = LoraRecipe();
  cadence["keep_last"] = 0;
  cadence["eval_every"] = 2;
  fs::path cpath = tmp_->path() / "lora-cadence.json";
  WriteJsonFile(cpath, cadence);
  ProcResult ok = RunBurst(TrainArgs(cpath, d, true));
  ASSERT_TRUE(ok.ok()) << "a cadence-only change must resume: " << ok.Describe();
  EXPECT_EQ(ParseStdout(ok).value("step", int64_t{0}), kSteps);
  ExpectSameFile(a_, d, kSteps, "state/trainable.safetensors");
}

}  // namespace
}  // namespace burst::e2e
