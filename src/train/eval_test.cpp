// Evaluation's batched paths against the one-example-at-a-time ones they
// replace: label scores from shared-prompt packed rows against
// CompletionLogProbs per (prompt, label), greedy completions decoded together
// against GreedyIds per prompt, on a random model loaded as users load one
// (LoadModel: q/k/v and gate/up fused).
#include "train/eval.h"

#include <gtest/gtest.h>

#include <random>

#include "model/hf_io.h"
#include "model/sampler.h"
#include "model/test_util.h"
#include "train/test_util.h"

namespace burst {
namespace {

struct EvalFixture : ::testing::Test {
  void SetUp() override {
    dir_ = std::make_unique<test_util::TempDir>("burst_eval_test_");
    testing::MakeTinyModel(dir_->path() / "m", 7);
    tok_ = LoadTokenizer(dir_->path() / "m");
    model_ = std::make_unique<LlamaModel>(LoadModel(dir_->path() / "m"));
    // Prompts of different lengths that share a 20-token system prompt, as a
    // chat format's do.
    std::mt19937 rng(3);
    std::uniform_int_distribution<int> id(5, static_cast<int>(tok_->vocab_size()) - 1);
    std::vector<int> system;
    for (int i = 0; i < 20; ++i) system.push_back(id(rng));
    for (int n : {3, 17, 1, 40, 9, 25}) {
      Example e;
      e.prompt_ids = system;
      for (int i = 0; i < n; ++i) e.prompt_ids.push_back(id(rng));
      examples_.push_back(e);
    }
    for (const Example& e : examples_) ptrs_.push_back(&e);
  }

  std::unique_ptr<test_util::TempDir> dir_;
  std::unique_ptr<Tokenizer> tok_;
  std::unique_ptr<LlamaModel> model_;
  std::vector<Example> examples_;
  std::vector<const Example*> ptrs_;
};

TEST_F(EvalFixture, LabelScoresFromPackedRowsMatchOnePairAtATime) {
  // Labels of 1-4 tokens, two sharing their first token, one a prefix of another.
  const std::vector<std::vector<int>> labels = {{40, 41, 2}, {40, 77, 2}, {90, 2}, {2}, {90, 2, 5, 6}};
  torch::NoGradGuard no_grad;
  const torch::Tensor got = LabelLogProbs(*model_, ptrs_, labels);  // (E, K)
  ASSERT_EQ(got.sizes(), torch::IntArrayRef({static_cast<int64_t>(ptrs_.size()), 5}));
  for (size_t e = 0; e < ptrs_.size(); ++e) {
    std::vector<PromptCompletion> seqs;
    for (const auto& label : labels) seqs.emplace_back(&ptrs_[e]->prompt_ids, &label);
    const torch::Tensor want = CompletionLogProbs(*model_, seqs);  // (K)
    for (size_t k = 0; k < labels.size(); ++k) {
      EXPECT_NEAR(got[static_cast<int64_t>(e)][static_cast<int64_t>(k)].item<double>(),
                  want[static_cast<int64_t>(k)].item<double>(), 1e-4)
          << "example " << e << ", label " << k;
    }
  }
}

TEST_F(EvalFixture, GreedyCompletionsDecodedTogetherMatchEachAlone) {
  // Stop on a token the random model does pick for some prompts, so that
  // rows finish at different steps.
  std::vector<int> stops = {GreedyIds(*model_, ptrs_[0]->prompt_ids, {}, 3).at(1)};
  const auto got = GreedyCompletions(*model_, *tok_, ptrs_, stops, 12);
  ASSERT_EQ(got.size(), ptrs_.size());
  int64_t stopped = 0;
  for (size_t e = 0; e < ptrs_.size(); ++e) {
    const std::vector<int> want = GreedyIds(*model_, ptrs_[e]->prompt_ids, stops, 12);
    EXPECT_EQ(got[e], want) << "example " << e;
    stopped += want.size() < 12;
  }
  EXPECT_GE(stopped, 1);  // the stop id did end some completion early
}

TEST_F(EvalFixture, StopRequestEndsTheDecodingWithCancelled) {
  int calls = 0;
  auto stop_after_two = [&] {
    if (++calls > 2) throw Error(Code::kCancelled, "evaluation stopped", "");
  };
  try {
    GreedyCompletions(*model_, *tok_, ptrs_, {}, 50, stop_after_two);
    FAIL() << "expected kCancelled";
  } catch (const Error& e) {
    EXPECT_EQ(e.status().code(), Code::kCancelled);
  }
  EXPECT_EQ(calls, 3);
}

}  // namespace
}  // namespace burst
