// End-to-end tests of the `burst` command: each test starts the real binary
// as a process on a tiny random model (init-model --preset tiny with the tiny
// BPE tokenizer) and a small slice of the support data, and checks what a user
// or a script sees: exit codes, messages, JSON output and the run folder
// layout of docs/recipe.md ("Run output") and the commands of docs/design.md (section 9).
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <memory>
#include <stdexcept>

#include "core/blas_core.h"
#include "e2e_util.h"

namespace burst::e2e {
namespace {

// One tiny model, one data slice and one short LoRA run, shared by the tests.
class CliTest : public ::testing::Test {
 protected:
  static constexpr int64_t kSteps = 4;
  static constexpr int kTrainLines = 64, kValidLines = 16;

  static void SetUpTestSuite() {
    tmp_ = new TempDir("burst-e2e-cli");
    fs::path root = tmp_->path();
    model_ = root / "model";
    ProcResult init = InitTinyModel(model_);
    if (!init.ok()) {
      setup_error_ = "init-model failed: " + init.Describe();
      return;
    }
    WriteSupportSubset(root, kTrainLines, kValidLines);
    train_ = root / "train.jsonl";
    valid_ = root / "valid.jsonl";
    recipe_ = root / "lora.json";
    WriteJsonFile(recipe_, LoraRecipe());
    run_ = root / "lora-run";
    train_result_ = RunBurst({"train", "--config", recipe_.string(), "--out", run_.string()});
    if (!train_result_.ok()) {
      setup_error_ = "the shared LoRA run failed: " + train_result_.Describe();
      return;
    }
    sampler_ = StepDir(run_, kSteps) / "sampler";
    // base + the final adapter on the valid slice, used by several tests.
    ProcResult ev = RunBurst({"eval", "--model", model_.string(), "--adapter", sampler_.string(), "--data",
                              valid_.string(), "--json", "--threads", "1"});
    try {
      if (!ev.ok()) throw std::runtime_error(ev.Describe());
      adapted_eval_ = Json::parse(ev.out);
    } catch (const std::exception& e) {
      setup_error_ = std::string("eval of the shared LoRA run failed: ") + e.what();
    }
  }
  static void TearDownTestSuite() {
    delete tmp_;
    tmp_ = nullptr;
  }
  void SetUp() override {
    if (!setup_error_.empty()) FAIL() << setup_error_;
  }

  // LoRA, 4 steps, checkpoint every 2, eval on the valid slice.
  static Json LoraRecipe() {
    return {{"model", model_.string()},
            {"train_file", train_.string()},
            {"valid_file", valid_.string()},
            {"method", "lora"},
            {"lora", {{"rank", 4}, {"alpha", 8}, {"dropout", 0.1}, {"targets", {"q", "v", "down_proj"}}}},
            {"batch_size", 4},
            {"max_steps", kSteps},
            {"checkpoint_every", 2},
            {"seed", 3},
            {"threads", 1}};
  }

  // A fresh folder under the suite's temp dir.
  static fs::path NewDir(const std::string& name) {
    fs::path p = tmp_->path() / name;
    fs::remove_all(p);
    return p;
  }

  // A run's eval lines, by step.
  static std::map<int64_t, Json> EvalLines(const fs::path& run) {
    std::map<int64_t, Json> out;
    for (const auto& line : ReadJsonLines(run / "metrics.jsonl"))
      if (line.value("type", "") == "eval") out[line["step"].get<int64_t>()] = line;
    return out;
  }

  static Json ParseStdout(const ProcResult& r) {
    try {
      return Json::parse(r.out);
    } catch (const std::exception& e) {
      ADD_FAILURE() << "stdout is not JSON: " << e.what() << "\n" << r.Describe();
      return Json::object();
    }
  }

  // Trains `recipe` into a fresh dir, expects a failure whose stderr holds
  // every one of `needles`, and no checkpoint or train metrics left behind.
  static void ExpectTrainFails(const std::string& name, const Json& recipe,
                               const std::vector<std::string>& needles) {
    SCOPED_TRACE(name);
    fs::path rpath = tmp_->path() / (name + ".json");
    WriteJsonFile(rpath, recipe);
    fs::path dir = NewDir(name + "-run");
    ProcResult r = RunBurst({"train", "--config", rpath.string(), "--out", dir.string()});
    EXPECT_EQ(r.term_signal, 0) << r.Describe();
    EXPECT_FALSE(r.timed_out);
    EXPECT_NE(r.exit_code, 0) << r.Describe();
    for (const auto& n : needles)
      EXPECT_TRUE(Contains(r.err, n)) << "stderr lacks \"" << n << "\"\n" << r.Describe();
    EXPECT_TRUE(CheckpointSteps(dir).empty()) << "a failed run left checkpoints in " << dir;
    EXPECT_EQ(MaxTrainStep(dir), 0) << "a failed run left train metrics in " << dir;
    // Nothing that would make a retry (after fixing the input) trip over
    // "already holds a run".
    for (const char* f : {"recipe.json", "metrics.jsonl", "checkpoints"})
      EXPECT_FALSE(fs::exists(dir / f)) << "a run that never started left " << dir / f;
    EXPECT_FALSE(Contains(r.out, "trained ")) << "a failed run printed a result:\n" << r.out;
  }

  static inline TempDir* tmp_ = nullptr;
  static inline std::string setup_error_;
  static inline fs::path model_, train_, valid_, recipe_, run_, sampler_;
  static inline ProcResult train_result_;
  static inline Json adapted_eval_;
};

// ----------------------------------------------------------------------------
// help

// `burst` runs the control plane's and the API's commands without the
// engine, and names the engine when a command needs it and it is missing.
TEST_F(CliTest, TheControlCommandsNeedNoEngineAndAMissingOneIsNamed) {
  ::setenv("BURST_ENGINE", "/nonexistent/burst-engine", 1);
  ProcResult version = RunBurst({"--version"});
  ProcResult jobs = RunBurst({"jobs", "list", "--help"});
  ProcResult serve = RunBurst({"serve", "--help"});
  ProcResult top = RunBurst({"--help"});
  ProcResult train = RunBurst({"train", "--help"});
  ::unsetenv("BURST_ENGINE");
  EXPECT_TRUE(version.ok() && Contains(version.out, "burst")) << version.Describe();
  EXPECT_TRUE(jobs.ok() && Contains(jobs.out, "--limit")) << jobs.Describe();
  EXPECT_TRUE(serve.ok() && Contains(serve.out, "--executor")) << serve.Describe();
  EXPECT_TRUE(top.ok() && Contains(top.out, "train") && Contains(top.out, "worker")) << top.Describe();
  EXPECT_EQ(train.exit_code, 127) << train.Describe();
  EXPECT_TRUE(Contains(train.err, "/nonexistent/burst-engine") && Contains(train.err, "BURST_ENGINE"))
      << train.err;
  // With the engine beside it, the engine's own help comes back under `burst`.
  ProcResult real = RunBurst({"train", "--help"});
  EXPECT_TRUE(real.ok() && Contains(real.out, "--config") && Contains(real.out, "burst train"))
      << real.Describe();
}

TEST_F(CliTest, HelpForEveryCommandExitsZeroAndShowsDefaults) {
  ProcResult top = RunBurst({"--help"});
  ASSERT_TRUE(top.ok()) << top.Describe();
  for (const char* sub : {"init-model", "train", "eval", "sample", "tokenize", "export", "data", "serve",
                          "files", "jobs", "logs", "workers", "usage", "worker", "orgs", "keys", "models"})
    EXPECT_TRUE(Contains(top.out, sub)) << "top-level help does not list " << sub << "\n" << top.out;

  ProcResult version = RunBurst({"--version"});
  EXPECT_TRUE(version.ok()) << version.Describe();
  EXPECT_TRUE(Contains(version.out, "burst")) << version.out;

  // Each subcommand's help, and option lines that must carry their defaults.
  struct Case {
    std::vector<std::string> args;
    std::vector<std::pair<std::string, std::string>> options;  // option, default ("" = just listed)
  };
  const std::vector<Case> cases = {
      {{"init-model", "--help"},
       {{"--preset", "small"}, {"--seed", "0"}, {"--out", ""}, {"--tokenizer", ""}}},
      {{"train", "--help"}, {{"--config", ""}, {"--out", ""}, {"--resume", ""}, {"--overwrite", ""}}},
      {{"eval", "--help"},
       {{"--max-seq-len", "512"}, {"--batch-size", "8"}, {"--adapter", ""}, {"--json", ""}}},
      {{"sample", "--help"},
       {{"--max-tokens", "64"},
        {"--temperature", "1"},
        {"--top-p", "1"},
        {"--top-k", "0"},
        {"--n", "1"},
        {"--seed", "0"},
        {"--stop", ""},
        {"--messages", ""}}},
      {{"tokenize", "--help"}, {{"--template", "auto"}, {"--text", ""}, {"--messages", ""}}},
      {{"export", "--help"}, {{"--dtype", "float32"}, {"--merge", ""}, {"--adapter", ""}}},
      {{"data", "--help"}, {{"check", ""}}},
      {{"data", "check", "--help"}, {{"--max-seq-len", "512"}, {"--loss", "cross_entropy"}, {"--model", ""}}},
      {{"serve", "--help"},
       {{"--data", "burst-data"}, {"--listen", "127.0.0.1:8470"}, {"--max-body-mb", "512"}}},
      {{"files", "upload", "--help"},
       {{"--purpose", "fine-tune"}, {"--url", "http://127.0.0.1:8470"}, {"--api-key", ""}}},
      {{"files", "list", "--help"}, {{"--limit", "20"}, {"--after", ""}}},
      {{"jobs", "--help"},
       {{"create", ""}, {"list", ""}, {"get", ""}, {"cancel", ""}, {"events", ""}, {"checkpoints", ""}}},
      {{"jobs", "create", "--help"},
       {{"--model", ""},
        {"--training-file", ""},
        {"--validation-file", ""},
        {"--method", ""},
        {"--n-epochs", ""},
        {"--batch-size", ""},
        {"--lr-multiplier", ""},
        {"--suffix", ""},
        {"--seed", ""},
        {"--recipe", ""},
        {"--checkpoint-every", ""},
        {"--max-retries", ""},
        {"--timeout", ""},
        {"--idempotency-key", ""},
        {"--metadata", ""},
        {"--wait", ""},
        {"--json", ""},
        {"--url", "http://127.0.0.1:8470"},
        {"--api-key", ""}}},
      {{"jobs", "list", "--help"}, {{"--limit", "20"}, {"--after", ""}, {"--json", ""}}},
      {{"jobs", "get", "--help"}, {{"--json", ""}, {"--url", "http://127.0.0.1:8470"}}},
      {{"jobs", "cancel", "--help"}, {{"--json", ""}, {"--api-key", ""}}},
      {{"jobs", "events", "--help"}, {{"--limit", "20"}, {"--json", ""}}},
      {{"jobs", "checkpoints", "--help"}, {{"--json", ""}}},
      {{"logs", "--help"}, {{"--follow", ""}, {"--json", ""}, {"--url", "http://127.0.0.1:8470"}}},
      {{"workers", "--help"}, {{"--json", ""}, {"--api-key", ""}}},
      {{"usage", "--help"}, {{"--start", ""}, {"--end", ""}, {"--json", ""}}},
      {{"serve", "--help"},
       {{"--slots", ""},
        {"--threads-per-slot", ""},
        {"--scaledown-window", "60"},
        {"--lease-ttl", "10"},
        {"--price-per-slot-hour", "0.18"},
        {"--model-root", ""}}},
      {{"orgs", "create", "--help"}, {{"--data", "burst-data"}, {"--json", ""}}},
      {{"keys", "create", "--help"}, {{"--org", ""}, {"--name", ""}, {"--data", "burst-data"}}},
      {{"keys", "revoke", "--help"}, {{"--org", ""}}},
      {{"models", "add", "--help"}, {{"--data", "burst-data"}}},
      {{"models", "list", "--help"}, {{"--url", "http://127.0.0.1:8470"}, {"--json", ""}}},
  };
  for (const auto& c : cases) {
    std::string cmd;
    for (const auto& a : c.args) cmd += a + " ";
    SCOPED_TRACE(cmd);
    ProcResult r = RunBurst(c.args);
    ASSERT_TRUE(r.ok()) << r.Describe();
    for (const auto& [option, default_value] : c.options) {
      bool found = false;
      for (const auto& line : Lines(r.out)) {
        // "  --n INT=1   ..." : the option is a whole word on the line.
        size_t at = line.find(option);
        if (at == std::string::npos) continue;
        size_t end = at + option.size();
        if (end < line.size() && line[end] != ' ' && line[end] != ',' && line[end] != '=') continue;
        found = true;
        if (!default_value.empty()) {
          EXPECT_TRUE(Contains(line, "=" + default_value))
              << "the help line for " << option << " does not show the default " << default_value << ":\n"
              << line;
        }
        break;
      }
      EXPECT_TRUE(found) << option << " is not in the help:\n" << r.out;
    }
  }
}

TEST_F(CliTest, UnknownSubcommandOrFlagFails) {
  ProcResult r = RunBurst({"no-such-command"});
  EXPECT_NE(r.exit_code, 0) << r.Describe();
  ProcResult f = RunBurst({"sample", "--model", model_.string(), "--prompt", "hi", "--no-such-flag"});
  EXPECT_NE(f.exit_code, 0) << f.Describe();
  EXPECT_TRUE(Contains(f.err + f.out, "--no-such-flag")) << f.Describe();
}

// ----------------------------------------------------------------------------
// init-model

TEST_F(CliTest, InitModelWritesHuggingFaceFolder) {
  for (const char* f : {"config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json",
                        "generation_config.json"})
    EXPECT_TRUE(fs::is_regular_file(model_ / f)) << f << " missing in " << model_;
  Json config = ReadJson(model_ / "config.json");
  EXPECT_EQ(config.value("vocab_size", 0), 279) << config.dump();
  EXPECT_TRUE(config.contains("hidden_size")) << config.dump();
  Json tc = ReadJson(model_ / "tokenizer_config.json");
  EXPECT_TRUE(tc.contains("chat_template")) << tc.dump();

  // Same seed, same weights; an existing model is not overwritten.
  fs::path again = NewDir("model-again");
  ProcResult r = InitTinyModel(again);
  ASSERT_TRUE(r.ok()) << r.Describe();
  EXPECT_EQ(Sha256File(again / "model.safetensors"), Sha256File(model_ / "model.safetensors"));
  ProcResult twice = InitTinyModel(again);
  EXPECT_NE(twice.exit_code, 0) << twice.Describe();
  EXPECT_TRUE(Contains(twice.err, "already")) << twice.Describe();
}

// ----------------------------------------------------------------------------
// train (LoRA): run folder layout

TEST_F(CliTest, TrainWritesResolvedRecipeWithEveryDefault) {
  // The human summary names the steps and the checkpoints.
  EXPECT_TRUE(Contains(train_result_.out, "trained 4/4 steps")) << train_result_.Describe();
  EXPECT_TRUE(Contains(train_result_.out, sampler_.string())) << train_result_.Describe();
  Json r = ReadJson(run_ / "recipe.json");
  for (const char* k :
       {"model",      "train_file",    "valid_file", "method",    "loss",      "dpo_beta",
        "lora",       "learning_rate", "optimizer",  "grad_clip", "schedule",  "batch_size",
        "grad_accum", "max_seq_len",   "truncate",   "epochs",    "max_steps", "checkpoint_every",
        "keep_last",  "eval_every",    "template",   "seed",      "threads",   "device"})
    EXPECT_TRUE(r.contains(k)) << "recipe.json lacks " << k << ":\n" << r.dump(2);
  for (const char* k : {"rank", "alpha", "dropout", "targets"})
    EXPECT_TRUE(r["lora"].contains(k)) << "recipe.json lacks lora." << k;
  for (const char* k : {"betas", "eps", "weight_decay"})
    EXPECT_TRUE(r["optimizer"].contains(k)) << "recipe.json lacks optimizer." << k;
  for (const char* k : {"kind", "warmup_steps"})
    EXPECT_TRUE(r["schedule"].contains(k)) << "recipe.json lacks schedule." << k;
  // Given values kept, defaults filled in.
  EXPECT_EQ(r["lora"]["rank"], 4);
  EXPECT_EQ(r["lora"]["targets"], Json({"q_proj", "v_proj", "down_proj"}));
  EXPECT_EQ(r["max_steps"], kSteps);
  EXPECT_EQ(r["threads"], 1);
  EXPECT_EQ(r["keep_last"], 3);
  EXPECT_EQ(r["schedule"]["kind"], "linear");
  EXPECT_DOUBLE_EQ(r["learning_rate"].get<double>(), 2e-4);
  EXPECT_EQ(r["loss"], "cross_entropy");
  // Paths are absolute, so the recipe still works from another folder.
  EXPECT_TRUE(fs::path(r["train_file"].get<std::string>()).is_absolute()) << r["train_file"];
}

TEST_F(CliTest, TrainMetricsFollowTheContract) {
  bool parsed = false;
  std::vector<Json> lines = ReadJsonLines(run_ / "metrics.jsonl", &parsed);
  ASSERT_TRUE(parsed) << "metrics.jsonl has a line that does not parse";
  std::vector<Json> train, eval;
  for (const auto& j : lines) {
    ASSERT_TRUE(j.is_object());
    ASSERT_TRUE(j.contains("type") && j.contains("step")) << j.dump();
    if (j["type"] == "train")
      train.push_back(j);
    else if (j["type"] == "eval")
      eval.push_back(j);
    else
      ADD_FAILURE() << "unknown metrics type: " << j.dump();
  }
  ASSERT_EQ(train.size(), static_cast<size_t>(kSteps));
  int64_t prev_tokens = 0;
  double prev_wall = 0;
  for (size_t i = 0; i < train.size(); ++i) {
    const Json& t = train[i];
    SCOPED_TRACE(t.dump());
    for (const char* k : {"type", "step", "train_loss", "lr", "tokens", "loss_tokens", "wall_s"})
      ASSERT_TRUE(t.contains(k)) << "train line lacks " << k;
    EXPECT_EQ(t["step"].get<int64_t>(), static_cast<int64_t>(i + 1));
    EXPECT_TRUE(std::isfinite(t["train_loss"].get<double>()));
    EXPECT_GT(t["train_loss"].get<double>(), 0);
    EXPECT_GT(t["lr"].get<double>(), 0);
    EXPECT_TRUE(t["tokens"].is_number_integer());
    EXPECT_GT(t["tokens"].get<int64_t>(), prev_tokens) << "tokens must grow with each step";
    prev_tokens = t["tokens"].get<int64_t>();
    EXPECT_GT(t["loss_tokens"].get<double>(), 0);
    EXPECT_GE(t["wall_s"].get<double>(), prev_wall);
    prev_wall = t["wall_s"].get<double>();
  }
  // Linear decay without warmup: the lr falls.
  EXPECT_GT(train.front()["lr"].get<double>(), train.back()["lr"].get<double>());
  // eval_every 0: before training and at the end.
  ASSERT_EQ(eval.size(), 2u) << "expected eval lines at step 0 and " << kSteps;
  EXPECT_EQ(eval[0]["step"], 0);
  EXPECT_EQ(eval[1]["step"], kSteps);
  for (const auto& e : eval) {
    SCOPED_TRACE(e.dump());
    for (const char* k : {"eval_loss", "eval_token_acc", "eval_exact_match", "eval_label_acc"})
      ASSERT_TRUE(e.contains(k)) << "eval line lacks " << k;
    EXPECT_TRUE(std::isfinite(e["eval_loss"].get<double>()));
    EXPECT_GT(e["eval_loss"].get<double>(), 0);
    for (const char* k : {"eval_token_acc", "eval_exact_match", "eval_label_acc"}) {
      EXPECT_GE(e[k].get<double>(), 0.0) << k;
      EXPECT_LE(e[k].get<double>(), 1.0) << k;
    }
  }
  // The support data has a fixed label set: label accuracy is above zero
  // even for a random model (the most likely label wins).
  EXPECT_GT(eval[0]["eval_label_acc"].get<double>(), 0.0);
}

TEST_F(CliTest, TrainWritesCheckpointsWithVerifiedManifests) {
  EXPECT_EQ(CheckpointSteps(run_), (std::vector<int64_t>{2, 4}));
  for (int64_t step : {2, 4}) {
    SCOPED_TRACE("step " + std::to_string(step));
    fs::path dir = StepDir(run_, step);
    EXPECT_TRUE(ManifestMatches(dir / "sampler", "peft-lora"));
    EXPECT_TRUE(ManifestMatches(dir / "state", "burst-state"));
    for (const char* f : {"adapter_config.json", "adapter_model.safetensors", "tokenizer.json",
                          "tokenizer_config.json", "generation_config.json", "run.json"})
      EXPECT_TRUE(fs::is_regular_file(dir / "sampler" / f)) << f << " missing in the sampler";
    for (const char* f : {"trainable.safetensors", "optimizer.safetensors"})
      EXPECT_TRUE(fs::is_regular_file(dir / "state" / f)) << f << " missing in the state";
    Json manifest = ReadJson(dir / "state" / "manifest.json");
    EXPECT_EQ(manifest.value("step", int64_t{-1}), step);
  }
  // The adapter names its base; run.json records how it was made.
  Json adapter = ReadJson(sampler_ / "adapter_config.json");
  EXPECT_EQ(fs::path(adapter.value("base_model_name_or_path", "")).lexically_normal(),
            model_.lexically_normal());
  EXPECT_EQ(adapter.value("r", 0), 4) << adapter.dump();
  Json run = ReadJson(sampler_ / "run.json");
  for (const char* k : {"recipe", "device", "threads", "base_model_sha256", "train_sha256"})
    EXPECT_TRUE(run.contains(k)) << "run.json lacks " << k << ":\n" << run.dump(2);
  EXPECT_EQ(run.value("threads", 0), 1);
  EXPECT_EQ(run.value("train_sha256", ""), Sha256File(train_));
  // OpenBLAS's kernels are recorded, and never a pre-AVX2 fallback on a CPU
  // that has better (core/blas_core.h; Debian's OpenBLAS does not know this
  // build machine's CPU and would run it on SSE3).
  ASSERT_TRUE(run.contains("blas")) << run.dump(2);
  EXPECT_EQ(BetterBlasCore(run.value("blas", ""), HostVectorUnits()), "") << run.dump(2);
  // The two checkpoints differ: training moved the adapter.
  EXPECT_NE(Sha256File(StepDir(run_, 2) / "sampler/adapter_model.safetensors"),
            Sha256File(sampler_ / "adapter_model.safetensors"));
}

TEST_F(CliTest, TrainIntoAPreviousRunNeedsResumeOrOverwrite) {
  fs::path dir = NewDir("rerun");
  fs::copy(run_, dir, fs::copy_options::recursive);
  const std::string before = Sha256File(StepDir(dir, kSteps) / "state/trainable.safetensors");

  ProcResult r = RunBurst({"train", "--config", recipe_.string(), "--out", dir.string()});
  EXPECT_EQ(r.term_signal, 0);
  EXPECT_NE(r.exit_code, 0) << r.Describe();
  EXPECT_TRUE(Contains(r.err, "--resume")) << r.Describe();
  EXPECT_TRUE(Contains(r.err, "--overwrite")) << r.Describe();
  // Nothing of the previous run was touched.
  EXPECT_TRUE(ManifestMatches(StepDir(dir, kSteps) / "state", "burst-state"));
  EXPECT_EQ(Sha256File(StepDir(dir, kSteps) / "state/trainable.safetensors"), before);
  EXPECT_EQ(MetricsWithoutWall(dir), MetricsWithoutWall(run_));

  // Leave a stray checkpoint: --overwrite must replace the whole run.
  fs::create_directories(StepDir(dir, 99) / "state");
  ProcResult o = RunBurst({"train", "--config", recipe_.string(), "--out", dir.string(), "--overwrite"});
  ASSERT_TRUE(o.ok()) << o.Describe();
  EXPECT_EQ(CheckpointSteps(dir), (std::vector<int64_t>{2, 4}));
  EXPECT_TRUE(ManifestMatches(StepDir(dir, kSteps) / "state", "burst-state"));
  // Same recipe, same seed, same thread count: the same run.
  EXPECT_EQ(MetricsWithoutWall(dir), MetricsWithoutWall(run_));
  EXPECT_EQ(Sha256File(StepDir(dir, kSteps) / "state/trainable.safetensors"), before);
}

TEST_F(CliTest, OverwriteThatFailsToStartKeepsThePreviousRun) {
  fs::path dir = NewDir("overwrite-bad");
  fs::copy(run_, dir, fs::copy_options::recursive);
  fs::path bad = tmp_->path() / "overwrite-bad.jsonl";
  WriteText(bad, R"({"messages":[{"role":"wizard","content":"x"},{"role":"assistant","content":"billing"}]})"
                 "\n");
  Json recipe = LoraRecipe();
  recipe["train_file"] = bad.string();
  fs::path rpath = tmp_->path() / "overwrite-bad.json";
  WriteJsonFile(rpath, recipe);
  ProcResult r = RunBurst({"train", "--config", rpath.string(), "--out", dir.string(), "--overwrite"});
  EXPECT_NE(r.exit_code, 0) << r.Describe();
  EXPECT_TRUE(Contains(r.err, "wizard")) << r.Describe();
  // A typo in the new data must not cost the old run.
  EXPECT_EQ(Slurp(dir / "recipe.json"), Slurp(run_ / "recipe.json"));
  EXPECT_EQ(CheckpointSteps(dir), (std::vector<int64_t>{2, 4}));
  EXPECT_TRUE(ManifestMatches(StepDir(dir, kSteps) / "state", "burst-state"));
  EXPECT_TRUE(ManifestMatches(StepDir(dir, kSteps) / "sampler", "peft-lora"));
  EXPECT_EQ(MetricsWithoutWall(dir), MetricsWithoutWall(run_));
}

TEST_F(CliTest, FullFineTuneWritesHuggingFaceSampler) {
  Json recipe = LoraRecipe();
  recipe.erase("lora");
  recipe["method"] = "full";
  recipe["max_steps"] = 2;
  recipe["checkpoint_every"] = 0;
  fs::path rpath = tmp_->path() / "full.json";
  WriteJsonFile(rpath, recipe);
  fs::path dir = NewDir("full-run");
  ProcResult r = RunBurst({"train", "--config", rpath.string(), "--out", dir.string(), "--json"});
  ASSERT_TRUE(r.ok()) << r.Describe();
  Json res = ParseStdout(r);
  EXPECT_EQ(res.value("step", int64_t{0}), 2);
  EXPECT_EQ(res.value("interrupted", true), false);
  EXPECT_EQ(CheckpointSteps(dir), (std::vector<int64_t>{2}));
  fs::path sampler = StepDir(dir, 2) / "sampler";
  for (const char* f : {"config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json",
                        "generation_config.json", "run.json"})
    EXPECT_TRUE(fs::is_regular_file(sampler / f)) << f << " missing in the full sampler";
  EXPECT_FALSE(fs::exists(sampler / "adapter_config.json"));
  EXPECT_TRUE(ManifestMatches(sampler, "hf-llama"));
  EXPECT_TRUE(ManifestMatches(StepDir(dir, 2) / "state", "burst-state"));
  EXPECT_EQ(ReadJson(dir / "recipe.json")["learning_rate"].get<double>(), 2e-5);
  // Full fine-tuning changed the weights, and the sampler loads as a model.
  EXPECT_NE(Sha256File(sampler / "model.safetensors"), Sha256File(model_ / "model.safetensors"));
  ProcResult ev =
      RunBurst({"eval", "--model", sampler.string(), "--data", valid_.string(), "--json", "--threads", "1"});
  ASSERT_TRUE(ev.ok()) << ev.Describe();
  EXPECT_TRUE(std::isfinite(ParseStdout(ev).value("eval_loss", NAN)));
}

// ----------------------------------------------------------------------------
// sample, eval, export, data check, tokenize

TEST_F(CliTest, SampleJsonIsDeterministicAndWellFormed) {
  const std::vector<std::string> args = {"sample",       "--model", sampler_.string(), "--prompt", "hello",
                                         "--max-tokens", "5",       "--json",          "--seed",   "7",
                                         "--threads",    "1"};
  ProcResult a = RunBurst(args);
  ASSERT_TRUE(a.ok()) << a.Describe();
  Json j = ParseStdout(a);
  ASSERT_TRUE(j.contains("prompt_token_ids") && j["prompt_token_ids"].is_array()) << a.out;
  EXPECT_FALSE(j["prompt_token_ids"].empty());
  ASSERT_TRUE(j.contains("samples") && j["samples"].is_array() && j["samples"].size() == 1) << a.out;
  const Json& s = j["samples"][0];
  ASSERT_TRUE(s.contains("token_ids") && s.contains("logprobs") && s.contains("finish_reason") &&
              s.contains("text"))
      << s.dump();
  EXPECT_LE(s["token_ids"].size(), 5u);
  EXPECT_GE(s["token_ids"].size(), 1u);
  ASSERT_EQ(s["logprobs"].size(), s["token_ids"].size());
  for (const auto& lp : s["logprobs"]) {
    EXPECT_TRUE(std::isfinite(lp.get<double>())) << lp;
    EXPECT_LE(lp.get<double>(), 0.0) << lp;
  }
  for (const auto& id : s["token_ids"]) {
    EXPECT_GE(id.get<int>(), 0);
    EXPECT_LT(id.get<int>(), 279);
  }
  const std::string reason = s["finish_reason"];
  EXPECT_TRUE(reason == "stop" || reason == "length") << reason;
  if (reason == "length") {
    EXPECT_EQ(s["token_ids"].size(), 5u);
  }

  ProcResult b = RunBurst(args);
  ASSERT_TRUE(b.ok()) << b.Describe();
  EXPECT_EQ(a.out, b.out) << "the same seed must give the same sample";

  // --messages renders the chat template; --n 2 gives two samples.
  fs::path msgs = tmp_->path() / "sample-messages.json";
  WriteJsonFile(msgs, Json::array({{{"role", "system"}, {"content", "Classify the ticket."}},
                                   {{"role", "user"}, {"content", "My card was charged twice."}}}));
  ProcResult m = RunBurst({"sample", "--model", sampler_.string(), "--messages", msgs.string(),
                           "--max-tokens", "5", "--json", "--seed", "7", "--n", "2", "--threads", "1"});
  ASSERT_TRUE(m.ok()) << m.Describe();
  Json mj = ParseStdout(m);
  ASSERT_TRUE(mj.contains("prompt_token_ids")) << m.out;
  std::vector<int> ids = mj["prompt_token_ids"].get<std::vector<int>>();
  ASSERT_FALSE(ids.empty());
  EXPECT_EQ(ids.front(), 277) << "a ChatML prompt starts with <|im_start|>";
  EXPECT_EQ(std::count(ids.begin(), ids.end(), 277), 3) << "system, user and the generation prompt";
  EXPECT_EQ(std::count(ids.begin(), ids.end(), 278), 2) << "<|im_end|> after system and user";
  ASSERT_EQ(mj["samples"].size(), 2u);
  for (const auto& sm : mj["samples"]) {
    EXPECT_EQ(sm["logprobs"].size(), sm["token_ids"].size());
    EXPECT_LE(sm["token_ids"].size(), 5u);
  }

  // Neither or both of --prompt and --messages is an error.
  ProcResult none = RunBurst({"sample", "--model", sampler_.string(), "--json"});
  EXPECT_NE(none.exit_code, 0) << none.Describe();
}

TEST_F(CliTest, EvalJsonReportsMetricsAndMatchesTraining) {
  // `burst eval --model BASE --adapter SAMPLER --data VALID --json`, run in SetUpTestSuite.
  const Json& j = adapted_eval_;
  for (const char* k : {"eval_loss", "eval_token_acc", "eval_exact_match", "eval_label_acc", "examples"})
    ASSERT_TRUE(j.contains(k)) << "eval --json lacks " << k << ": " << j.dump();
  EXPECT_EQ(j["examples"], kValidLines);
  EXPECT_TRUE(std::isfinite(j["eval_loss"].get<double>()));
  EXPECT_GT(j["eval_loss"].get<double>(), 0);
  for (const char* k : {"eval_token_acc", "eval_exact_match", "eval_label_acc"}) {
    EXPECT_GE(j[k].get<double>(), 0) << k;
    EXPECT_LE(j[k].get<double>(), 1) << k;
  }
  // The same numbers as the run's final eval line (batching may differ).
  std::map<int64_t, Json> evals = EvalLines(run_);
  ASSERT_TRUE(evals.count(kSteps));
  const Json& last_eval = evals[kSteps];
  EXPECT_TRUE(NearRel(j["eval_loss"].get<double>(), last_eval["eval_loss"].get<double>(), 1e-4))
      << j["eval_loss"] << " vs " << last_eval["eval_loss"];
  EXPECT_DOUBLE_EQ(j["eval_label_acc"].get<double>(), last_eval["eval_label_acc"].get<double>());

  // --model may name the LoRA checkpoint itself; the plain-text form prints
  // the same loss (4 decimals).
  ProcResult text =
      RunBurst({"eval", "--model", sampler_.string(), "--data", valid_.string(), "--threads", "1"});
  ASSERT_TRUE(text.ok()) << text.Describe();
  bool found = false;
  for (const auto& line : Lines(text.out)) {
    if (line.rfind("loss", 0) != 0) continue;
    found = true;
    double printed = std::stod(line.substr(line.find_first_of("0123456789")));
    EXPECT_NEAR(printed, j["eval_loss"].get<double>(), 1e-4) << line;
  }
  EXPECT_TRUE(found) << "no loss line:\n" << text.out;
}

TEST_F(CliTest, ExportMergedEqualsBasePlusAdapter) {
  fs::path out = NewDir("merged");
  ProcResult r = RunBurst({"export", "--model", model_.string(), "--adapter", sampler_.string(), "--merge",
                           "--out", out.string(), "--threads", "1"});
  ASSERT_TRUE(r.ok()) << r.Describe();
  for (const char* f : {"config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json"})
    EXPECT_TRUE(fs::is_regular_file(out / f)) << f << " missing in the export";
  EXPECT_FALSE(fs::exists(out / "adapter_config.json"));

  ProcResult e =
      RunBurst({"eval", "--model", out.string(), "--data", valid_.string(), "--json", "--threads", "1"});
  ASSERT_TRUE(e.ok()) << e.Describe();
  const double merged = ParseStdout(e).value("eval_loss", NAN);
  const double adapted = adapted_eval_["eval_loss"].get<double>();
  EXPECT_TRUE(NearRel(merged, adapted, 1e-4)) << "merged " << merged << " vs base+adapter " << adapted;
  // The step-0 eval is the base model (LoRA starts as a no-op): the adapter
  // must change the loss, or the comparison above proves nothing.
  std::map<int64_t, Json> evals = EvalLines(run_);
  ASSERT_TRUE(evals.count(0));
  const double base = evals[0]["eval_loss"].get<double>();
  EXPECT_FALSE(NearRel(base, adapted, 1e-5)) << "the adapter does not change the model: " << base;

  // --merge is required.
  ProcResult no_merge = RunBurst({"export", "--model", model_.string(), "--adapter", sampler_.string(),
                                  "--out", NewDir("no-merge").string(), "--threads", "1"});
  EXPECT_NE(no_merge.exit_code, 0) << no_merge.Describe();
  EXPECT_TRUE(Contains(no_merge.err, "--merge")) << no_merge.Describe();
}

TEST_F(CliTest, DataCheckCountsExamplesAndTokens) {
  ProcResult r = RunBurst({"data", "check", train_.string(), "--model", model_.string(), "--json"});
  ASSERT_TRUE(r.ok()) << r.Describe();
  Json j = ParseStdout(r);
  for (const char* k : {"examples", "tokens", "loss_tokens", "truncated", "max_len"})
    ASSERT_TRUE(j.contains(k)) << "data check --json lacks " << k << ": " << r.out;
  EXPECT_EQ(j["examples"], kTrainLines);
  EXPECT_GT(j["loss_tokens"].get<int64_t>(), 0);
  EXPECT_GT(j["tokens"].get<int64_t>(), j["loss_tokens"].get<int64_t>());
  EXPECT_EQ(j["truncated"], 0);
  EXPECT_LE(j["max_len"].get<int64_t>(), 512);
  EXPECT_EQ(j.value("format", ""), "messages");

  // On the valid slice, the loss tokens are the ones eval scores.
  ProcResult v = RunBurst({"data", "check", valid_.string(), "--model", model_.string(), "--json"});
  ASSERT_TRUE(v.ok()) << v.Describe();
  Json vj = ParseStdout(v);
  EXPECT_EQ(vj["examples"], kValidLines);
  if (adapted_eval_.contains("loss_tokens")) {
    EXPECT_EQ(adapted_eval_["loss_tokens"], vj["loss_tokens"]);
  }

  // A lower limit truncates and says so.
  const int64_t limit = j["max_len"].get<int64_t>() - 8;
  ProcResult t = RunBurst({"data", "check", train_.string(), "--model", model_.string(), "--max-seq-len",
                           std::to_string(limit), "--json"});
  ASSERT_TRUE(t.ok()) << t.Describe();
  Json tj = ParseStdout(t);
  EXPECT_GT(tj["truncated"].get<int64_t>(), 0) << t.out;
  EXPECT_LE(tj["max_len"].get<int64_t>(), limit) << t.out;
}

TEST_F(CliTest, DataCheckWithoutAModelChecksTheFormatOnly) {
  ProcResult ok = RunBurst({"data", "check", train_.string(), "--json"});
  ASSERT_TRUE(ok.ok()) << ok.Describe();
  Json j = ParseStdout(ok);
  EXPECT_EQ(j["examples"], kTrainLines);
  EXPECT_EQ(j.value("format", ""), "messages");
  EXPECT_FALSE(j.contains("tokens")) << "no tokenizer, no token counts: " << ok.out;

  fs::path bad = tmp_->path() / "bad-role.jsonl";
  std::ofstream(bad) << "{\"text\":\"fine\"}\n{\"messages\":[{\"role\":\"robot\",\"content\":\"x\"}]}\n";
  ProcResult r = RunBurst({"data", "check", bad.string()});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_TRUE(Contains(r.err, bad.string() + ":2")) << r.Describe();
  EXPECT_TRUE(Contains(r.err, "messages[0].role")) << r.Describe();
}

TEST_F(CliTest, TokenizeShowsTheRenderedChat) {
  fs::path msgs = tmp_->path() / "tokenize-messages.json";
  WriteJsonFile(msgs, {{"messages", Json::array({{{"role", "user"}, {"content", "hello there"}},
                                                 {{"role", "assistant"}, {"content", "billing"}}})}});
  ProcResult r = RunBurst({"tokenize", "--model", model_.string(), "--messages", msgs.string(), "--json"});
  ASSERT_TRUE(r.ok()) << r.Describe();
  Json j = ParseStdout(r);
  ASSERT_TRUE(j.contains("ids") && j.contains("tokens")) << r.out;
  std::vector<int> ids = j["ids"].get<std::vector<int>>();
  std::vector<std::string> tokens = j["tokens"].get<std::vector<std::string>>();
  ASSERT_EQ(ids.size(), tokens.size());
  ASSERT_FALSE(ids.empty());
  // The fixture's ChatML specials, with their ids from tokenizer.json.
  EXPECT_EQ(ids.front(), 277);
  EXPECT_EQ(tokens.front(), "<|im_start|>");
  EXPECT_EQ(std::count(tokens.begin(), tokens.end(), "<|im_start|>"), 2);
  EXPECT_EQ(std::count(tokens.begin(), tokens.end(), "<|im_end|>"), 2);
  for (size_t i = 0; i < ids.size(); ++i) {
    if (tokens[i] == "<|im_end|>") {
      EXPECT_EQ(ids[i], 278);
    }
    if (tokens[i] == "<|im_start|>") {
      EXPECT_EQ(ids[i], 277);
    }
  }
  if (j.contains("text")) {
    EXPECT_EQ(j["text"],
              "<|im_start|>user\nhello there<|im_end|>\n<|im_start|>assistant\nbilling<|im_end|>\n");
  }

  // --text parses special tokens written in it.
  ProcResult t = RunBurst({"tokenize", "--model", model_.string(), "--text", "hi<|im_end|>", "--json"});
  ASSERT_TRUE(t.ok()) << t.Describe();
  Json tj = ParseStdout(t);
  ASSERT_FALSE(tj["ids"].empty());
  EXPECT_EQ(tj["ids"].back(), 278);
  EXPECT_EQ(tj["tokens"].back(), "<|im_end|>");
}

// ----------------------------------------------------------------------------
// bad input: a non-zero exit, a message naming what is wrong, no run output

TEST_F(CliTest, MalformedJsonlLineIsNamedByFileAndLine) {
  fs::path dir = tmp_->path() / "bad-json";
  std::vector<std::string> lines = Lines(Slurp(train_));
  lines[2] = "{\"messages\": [{\"role\": \"user\", \"content\": \"unterminated";
  std::string text;
  for (size_t i = 0; i < 8; ++i) text += lines[i] + "\n";
  WriteText(dir / "train.jsonl", text);
  Json recipe = LoraRecipe();
  recipe["train_file"] = (dir / "train.jsonl").string();
  ExpectTrainFails("bad-json", recipe, {"train.jsonl:3"});

  ProcResult check = RunBurst({"data", "check", (dir / "train.jsonl").string(), "--model", model_.string()});
  EXPECT_NE(check.exit_code, 0) << check.Describe();
  EXPECT_TRUE(Contains(check.err, "train.jsonl:3")) << check.Describe();
}

TEST_F(CliTest, UnknownRoleIsNamed) {
  fs::path file = tmp_->path() / "bad-role" / "train.jsonl";
  std::vector<std::string> lines = Lines(Slurp(train_));
  WriteText(
      file,
      lines[0] + "\n" +
          R"({"messages":[{"role":"wizard","content":"abracadabra"},{"role":"assistant","content":"billing"}]})"
          "\n" +
          lines[1] + "\n");
  Json recipe = LoraRecipe();
  recipe["train_file"] = file.string();
  ExpectTrainFails("bad-role", recipe, {"train.jsonl:2", "wizard"});
}

TEST_F(CliTest, MissingContentIsNamed) {
  fs::path file = tmp_->path() / "bad-content" / "train.jsonl";
  std::vector<std::string> lines = Lines(Slurp(train_));
  WriteText(file, lines[0] + "\n" + lines[1] + "\n" +
                      R"({"messages":[{"role":"user"},{"role":"assistant","content":"billing"}]})"
                      "\n");
  Json recipe = LoraRecipe();
  recipe["train_file"] = file.string();
  ExpectTrainFails("bad-content", recipe, {"train.jsonl:3", "content"});
}

TEST_F(CliTest, TooLongSequenceWithoutTruncationIsNamed) {
  fs::path file = tmp_->path() / "too-long" / "train.jsonl";
  std::string long_text;
  for (int i = 0; i < 200; ++i) long_text += "my order never arrived ";
  Json short_line = {{"messages", Json::array({{{"role", "user"}, {"content", "hi"}},
                                               {{"role", "assistant"}, {"content", "feedback"}}})}};
  Json long_line = {{"messages", Json::array({{{"role", "user"}, {"content", long_text}},
                                              {{"role", "assistant"}, {"content", "shipping"}}})}};
  WriteText(file, short_line.dump() + "\n" + short_line.dump() + "\n" + long_line.dump() + "\n" +
                      short_line.dump() + "\n");
  Json recipe = LoraRecipe();
  recipe["train_file"] = file.string();
  recipe.erase("valid_file");
  recipe["max_seq_len"] = 128;
  recipe["truncate"] = false;
  ExpectTrainFails("too-long", recipe, {"train.jsonl:3", "max_seq_len"});
}

TEST_F(CliTest, UnknownRecipeFieldIsNamed) {
  Json recipe = LoraRecipe();
  recipe["lora"]["rnak"] = 8;
  ExpectTrainFails("bad-field", recipe, {"lora.rnak"});
  Json top = LoraRecipe();
  top["learning_rat"] = 1e-3;
  ExpectTrainFails("bad-top-field", top, {"learning_rat"});
}

TEST_F(CliTest, UnknownLoraTargetIsNamed) {
  Json recipe = LoraRecipe();
  recipe["lora"]["targets"] = {"q", "qq"};
  ExpectTrainFails("bad-target", recipe, {"qq"});
}

TEST_F(CliTest, TruncatedWeightsAreNamed) {
  fs::path bad = NewDir("model-truncated");
  fs::copy(model_, bad, fs::copy_options::recursive);
  fs::resize_file(bad / "model.safetensors", fs::file_size(bad / "model.safetensors") / 2);
  Json recipe = LoraRecipe();
  recipe["model"] = bad.string();
  ExpectTrainFails("truncated-weights", recipe, {"model.safetensors"});
  ProcResult e = RunBurst({"eval", "--model", bad.string(), "--data", valid_.string(), "--threads", "1"});
  EXPECT_NE(e.exit_code, 0) << e.Describe();
  EXPECT_EQ(e.term_signal, 0) << e.Describe();
  EXPECT_TRUE(Contains(e.err, "model.safetensors")) << e.Describe();
}

TEST_F(CliTest, ConfigThatDoesNotMatchTheWeightsNamesATensor) {
  fs::path bad = NewDir("model-mismatch");
  fs::copy(model_, bad, fs::copy_options::recursive);
  Json config = ReadJson(bad / "config.json");
  config["hidden_size"] = config["hidden_size"].get<int64_t>() * 2;
  WriteJsonFile(bad / "config.json", config);
  ProcResult e = RunBurst({"eval", "--model", bad.string(), "--data", valid_.string(), "--threads", "1"});
  EXPECT_NE(e.exit_code, 0) << e.Describe();
  EXPECT_EQ(e.term_signal, 0) << e.Describe();
  EXPECT_TRUE(Contains(e.err, ".weight")) << "no tensor named:\n" << e.Describe();
  Json recipe = LoraRecipe();
  recipe["model"] = bad.string();
  ExpectTrainFails("config-mismatch", recipe, {".weight"});
}

TEST_F(CliTest, UnknownModelNameFails) {
  Json recipe = LoraRecipe();
  recipe["model"] = "no-such-model-e2e";
  ExpectTrainFails("unknown-model", recipe, {"unknown model", "no-such-model-e2e"});
  ProcResult s = RunBurst({"sample", "--model", "no-such-model-e2e", "--prompt", "hi", "--threads", "1"});
  EXPECT_NE(s.exit_code, 0) << s.Describe();
  EXPECT_TRUE(Contains(s.err, "unknown model")) << s.Describe();
}

// ----------------------------------------------------------------------------
// a corrupt checkpoint is skipped by name on --resume

TEST_F(CliTest, ResumeSkipsACorruptCheckpoint) {
  fs::path dir = NewDir("corrupt");
  fs::copy(run_, dir, fs::copy_options::recursive);
  CorruptByte(StepDir(dir, 4) / "state/trainable.safetensors");

  ProcResult r =
      RunBurst({"train", "--config", recipe_.string(), "--out", dir.string(), "--resume", "--json"});
  ASSERT_TRUE(r.ok()) << r.Describe();
  EXPECT_TRUE(Contains(r.err, "step-00000004")) << "the skipped checkpoint is not named:\n" << r.Describe();
  Json res = ParseStdout(r);
  EXPECT_EQ(res.value("resumed_from", Json()).dump(), "2") << r.out;
  EXPECT_EQ(res.value("step", int64_t{0}), kSteps) << r.out;
  EXPECT_EQ(CheckpointSteps(dir), (std::vector<int64_t>{2, 4}));
  EXPECT_TRUE(ManifestMatches(StepDir(dir, 4) / "state", "burst-state"));
  EXPECT_TRUE(ManifestMatches(StepDir(dir, 4) / "sampler", "peft-lora"));
  // And it is the same step 4 as before the corruption (exact resume).
  EXPECT_EQ(Sha256File(StepDir(dir, 4) / "state/trainable.safetensors"),
            Sha256File(StepDir(run_, 4) / "state/trainable.safetensors"));
  EXPECT_EQ(MetricsWithoutWall(dir), MetricsWithoutWall(run_));
}

// keep_last 1 and the only checkpoint corrupt: the resumed run starts over,
// and the checkpoints it writes (here, the one SIGTERM asks for) must survive
// pruning rather than lose to the corrupt folder's higher step number.
TEST_F(CliTest, CheckpointsWrittenAfterSkippingACorruptOneAreKept) {
  Json recipe = LoraRecipe();
  recipe.erase("valid_file");
  recipe["checkpoint_every"] = 1;
  recipe["keep_last"] = 1;
  fs::path rpath = tmp_->path() / "keep1.json";
  WriteJsonFile(rpath, recipe);
  fs::path dir = NewDir("keep1");
  ProcResult first = RunBurst({"train", "--config", rpath.string(), "--out", dir.string(), "--json"});
  ASSERT_TRUE(first.ok()) << first.Describe();
  ASSERT_EQ(CheckpointSteps(dir), (std::vector<int64_t>{kSteps}));
  const std::string good = Sha256File(StepDir(dir, kSteps) / "state/trainable.safetensors");
  CorruptByte(StepDir(dir, kSteps) / "state/trainable.safetensors");

  // The fresh start removes the old metrics (which reach step 4): interrupt
  // once the new run has logged step 2.
  auto new_run_at_step_2 = [&] {
    bool has_old_end = false;
    for (const auto& line : Lines(Slurp(dir / "metrics.jsonl")))
      has_old_end |= Contains(line, "\"step\":" + std::to_string(kSteps) + ",");
    return !has_old_end && MaxTrainStep(dir) >= 2;
  };
  ProcResult r =
      RunBurstUntil({"train", "--config", rpath.string(), "--out", dir.string(), "--resume", "--json"},
                    new_run_at_step_2, SIGTERM);
  ASSERT_TRUE(r.signal_sent) << r.Describe();
  EXPECT_EQ(r.term_signal, 0) << r.Describe();
  EXPECT_NE(r.exit_code, 0) << r.Describe();
  EXPECT_TRUE(Contains(r.err, "step-00000004")) << r.Describe();
  Json res = ParseStdout(r);
  EXPECT_EQ(res.value("interrupted", false), true) << r.out;
  const int64_t k = res.value("step", int64_t{0});
  ASSERT_GE(k, 2) << r.out;
  ASSERT_LT(k, kSteps) << r.out;
  EXPECT_EQ(fs::path(res.value("state", "")), StepDir(dir, k) / "state") << r.out;
  EXPECT_TRUE(ManifestMatches(StepDir(dir, k) / "state", "burst-state"))
      << "the interrupted run reported a state checkpoint that is not there";
  EXPECT_EQ(CheckpointSteps(dir), (std::vector<int64_t>{k}));

  ProcResult rest =
      RunBurst({"train", "--config", rpath.string(), "--out", dir.string(), "--resume", "--json"});
  ASSERT_TRUE(rest.ok()) << rest.Describe();
  EXPECT_EQ(ParseStdout(rest).value("resumed_from", Json()).dump(), std::to_string(k)) << rest.out;
  EXPECT_EQ(CheckpointSteps(dir), (std::vector<int64_t>{kSteps}));
  EXPECT_TRUE(ManifestMatches(StepDir(dir, kSteps) / "state", "burst-state"));
  EXPECT_EQ(Sha256File(StepDir(dir, kSteps) / "state/trainable.safetensors"), good);
}

// Other kernels round otherwise: exact resume refuses them by name. On
// OpenBLAS another core type; on MKL (PyPI's libtorch) ATen's lowest CPU
// capability, which changes the kernels the run records.
TEST_F(CliTest, ResumeWithOtherBlasKernelsIsRefusedAndNamed) {
  const std::string recorded = ReadJson(StepDir(run_, 2) / "state/state.json").value("blas", "");
  ASSERT_FALSE(recorded.empty()) << "the run recorded no kernels";
  const bool mkl = recorded.rfind("MKL ", 0) == 0;
  const char* variable = mkl ? "ATEN_CPU_CAPABILITY" : "OPENBLAS_CORETYPE";
  if (mkl && recorded.find(" DEFAULT") != std::string::npos)
    GTEST_SKIP() << "no lower capability than " << recorded;
  const std::string other = mkl                      ? "default"
                            : recorded == "Prescott" ? "Core2"
                                                     : "Prescott";  // any x86-64 runs either
  fs::path dir = NewDir("blas");
  fs::copy(run_, dir, fs::copy_options::recursive);
  fs::remove_all(StepDir(dir, 4));
  // The caller's own value (a machine may set one for every process) is
  // put back: the tests after this one compute with it.
  const char* before = std::getenv(variable);
  const std::string saved = before != nullptr ? before : "";
  ASSERT_EQ(::setenv(variable, other.c_str(), 1), 0);
  ProcResult r =
      RunBurst({"train", "--config", recipe_.string(), "--out", dir.string(), "--resume", "--json"});
  if (before != nullptr) {
    ::setenv(variable, saved.c_str(), 1);
  } else {
    ::unsetenv(variable);
  }
  EXPECT_FALSE(r.ok()) << r.Describe();
  EXPECT_TRUE(Contains(r.err, mkl ? recorded : "OPENBLAS_CORETYPE=" + recorded)) << r.Describe();
  EXPECT_TRUE(Contains(r.err, mkl ? "DEFAULT" : other)) << r.Describe();
  EXPECT_EQ(CheckpointSteps(dir), (std::vector<int64_t>{2})) << "the refused resume wrote a checkpoint";
}

TEST_F(CliTest, ResumeOfACompleteRunIsANoOp) {
  fs::path dir = NewDir("complete");
  fs::copy(run_, dir, fs::copy_options::recursive);
  ProcResult r =
      RunBurst({"train", "--config", recipe_.string(), "--out", dir.string(), "--resume", "--json"});
  ASSERT_TRUE(r.ok()) << r.Describe();
  EXPECT_EQ(ParseStdout(r).value("step", int64_t{0}), kSteps);
  EXPECT_EQ(MetricsWithoutWall(dir), MetricsWithoutWall(run_));
  EXPECT_EQ(Sha256File(StepDir(dir, 4) / "state/trainable.safetensors"),
            Sha256File(StepDir(run_, 4) / "state/trainable.safetensors"));
}

}  // namespace
}  // namespace burst::e2e
