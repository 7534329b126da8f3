#include "train/recipe.h"

#include <gtest/gtest.h>

namespace burst {
namespace {

Recipe ParseText(const std::string& text) {
  return Recipe::Parse(Json::parse(text), "/data/runs", "recipe.json");
}

std::string ErrorOf(const std::string& text) {
  try {
    ParseText(text);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(Recipe, DefaultsAreFilledAndPathsResolved) {
  Recipe r = ParseText(R"({"model": "burst-small", "train_file": "train.jsonl"})");
  EXPECT_EQ(r.train_file, "/data/runs/train.jsonl");
  EXPECT_EQ(r.method, "lora");
  EXPECT_DOUBLE_EQ(r.learning_rate, Recipe::DefaultLearningRate("lora"));
  EXPECT_EQ(r.lora.targets.size(), 7u);
  OrderedJson j = r.ToJson();
  for (const char* key : {"model",      "train_file",       "valid_file",  "method",     "loss",
                          "lora",       "learning_rate",    "optimizer",   "grad_clip",  "schedule",
                          "batch_size", "grad_accum",       "max_seq_len", "truncate",   "epochs",
                          "max_steps",  "checkpoint_every", "keep_last",   "eval_every", "template",
                          "seed",       "threads",          "device"}) {
    EXPECT_TRUE(j.contains(key)) << key;
  }
  // The resolved recipe parses back to itself.
  Recipe again = Recipe::Parse(Json::parse(j.dump()), "/elsewhere", "x");
  EXPECT_EQ(again.ToJson().dump(), j.dump());
}

TEST(Recipe, LoraTargetsAcceptShortNames) {
  Recipe r = ParseText(R"({"model": "m", "train_file": "t", "lora": {"targets": ["q", "v_proj", "gate"]}})");
  EXPECT_EQ(r.lora.targets, (std::vector<std::string>{"q_proj", "v_proj", "gate_proj"}));
}

TEST(Recipe, ErrorsNameTheField) {
  EXPECT_NE(ErrorOf(R"({"model": "m", "train_file": "t", "lora": {"rnak": 4}})").find("lora.rnak"),
            std::string::npos);
  EXPECT_NE(ErrorOf(R"({"model": "m", "train_file": "t", "epoch": 2})").find("epoch"), std::string::npos);
  EXPECT_NE(ErrorOf(R"({"model": "m", "train_file": "t", "lora": {"targets": ["qq"]}})").find("qq"),
            std::string::npos);
  EXPECT_NE(ErrorOf(R"({"model": "m", "train_file": "t", "batch_size": 0})").find("batch_size"),
            std::string::npos);
  EXPECT_NE(ErrorOf(R"({"model": "m", "train_file": "t", "method": "qlora"})").find("method"),
            std::string::npos);
  EXPECT_NE(
      ErrorOf(R"({"model": "m", "train_file": "t", "schedule": {"kind": "step"}})").find("schedule.kind"),
      std::string::npos);
  EXPECT_NE(ErrorOf(R"({"train_file": "t"})").find("model"), std::string::npos);
  EXPECT_NE(ErrorOf(R"({"model": "m", "train_file": "t", "learning_rate": "fast"})").find("learning_rate"),
            std::string::npos);
  // A frozen base in bfloat16: LoRA on a GPU only.
  EXPECT_NE(ErrorOf(R"({"model": "m", "train_file": "t", "base_dtype": "fp8"})").find("base_dtype"),
            std::string::npos);
  EXPECT_NE(ErrorOf(R"({"model": "m", "train_file": "t", "method": "full", "base_dtype": "bfloat16"})")
                .find("base_dtype: bfloat16 is for a LoRA run"),
            std::string::npos);
  EXPECT_NE(ErrorOf(R"({"model": "m", "train_file": "t", "device": "cpu", "base_dtype": "bfloat16"})")
                .find("base_dtype: bfloat16 needs a GPU"),
            std::string::npos);
  EXPECT_EQ(ParseText(R"({"model": "m", "train_file": "t", "device": "cuda", "base_dtype": "bfloat16"})")
                .base_dtype,
            "bfloat16");
}

// Variables for the model's own chat template: kept, written back, and only
// beside a template that takes them.
TEST(Recipe, TemplateKwargs) {
  Recipe r = ParseText(R"({"model": "m", "train_file": "t", "template": "model",
                           "template_kwargs": {"enable_thinking": false}})");
  EXPECT_EQ(r.template_kwargs, Json({{"enable_thinking", false}}));
  EXPECT_EQ(Recipe::Parse(Json::parse(r.ToJson().dump()), "/d", "x").template_kwargs, r.template_kwargs);
  EXPECT_NE(ErrorOf(R"({"model": "m", "train_file": "t", "template": "chatml",
                        "template_kwargs": {"enable_thinking": false}})")
                .find("template_kwargs"),
            std::string::npos);
  EXPECT_NE(ErrorOf(R"({"model": "m", "train_file": "t", "template_kwargs": [1]})").find("template_kwargs"),
            std::string::npos);
  EXPECT_NE(ErrorOf(R"({"model": "m", "train_file": "t", "template_kwargs": {"bos_token": "x"}})")
                .find("template_kwargs.bos_token"),
            std::string::npos);
  EXPECT_NE(ErrorOf(R"({"model": "m", "train_file": "t", "template": "jinja"})").find("template"),
            std::string::npos);
}

TEST(Recipe, TrainingRelevantIgnoresCadence) {
  Recipe a = ParseText(R"({"model": "m", "train_file": "t", "checkpoint_every": 5})");
  Recipe b = ParseText(R"({"model": "m", "train_file": "t", "checkpoint_every": 50, "eval_every": 3})");
  Recipe c = ParseText(R"({"model": "m", "train_file": "t", "learning_rate": 0.1})");
  EXPECT_EQ(a.TrainingRelevant(), b.TrainingRelevant());
  EXPECT_NE(a.TrainingRelevant(), c.TrainingRelevant());
}

TEST(Recipe, UnknownModelNameIsNotFound) {
  try {
    ResolveModelPath("no-such-model-anywhere");
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.status().code(), Code::kNotFound);
    EXPECT_NE(std::string(e.what()).find("unknown model"), std::string::npos);
  }
}

}  // namespace
}  // namespace burst
