// Tests of sampling (sampler.h) on a random tiny model with the tiny-bpe
// fixture tokenizer: greedy equals a hand-computed argmax chain over full
// forwards, seeds, reported log-probabilities, top-k, n, max_tokens, stop ids,
// stop strings and parameter validation.
#include "model/sampler.h"

#include <gtest/gtest.h>

#include "model/test_util.h"

namespace burst {
namespace {

using test_util::ExpectBurstError;

class SamplerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    torch::set_num_threads(1);
    tok_ = LoadTokenizer(std::filesystem::path(BURST_SOURCE_DIR) / "tests/fixtures/tiny-bpe");
    ASSERT_EQ(tok_->vocab_size(), 279);
    ASSERT_FALSE(tok_->stop_ids.empty());
    model_ = LlamaModel::Random(test_util::TinyConfig(279), 21, /*init_std=*/0.1);
    test_util::RandomizeNorms(model_, 22);
    prompt_ = tok_->Encode("Hello there, how are you?");
    ASSERT_GE(prompt_.size(), 3u);
  }

  // Greedy continuation computed by hand: a full forward over the whole
  // sequence at each step, argmax of the last position.
  std::vector<int> ArgmaxChain(const std::vector<int>& prompt, int64_t steps,
                               const std::vector<int>& stop_ids = {}) {
    torch::NoGradGuard no_grad;
    std::vector<int64_t> seq(prompt.begin(), prompt.end());
    std::vector<int> out;
    for (int64_t s = 0; s < steps; ++s) {
      torch::Tensor ids = torch::tensor(seq).view({1, -1});
      torch::Tensor logits = model_.Forward(ids);
      int64_t next = logits[0][-1].argmax().item<int64_t>();
      out.push_back(static_cast<int>(next));
      if (std::find(stop_ids.begin(), stop_ids.end(), next) != stop_ids.end()) break;
      seq.push_back(next);
    }
    return out;
  }

  // log_softmax of the raw logits of each generated token, by full forward.
  std::vector<float> FullLogProbs(const std::vector<int>& prompt, const std::vector<int>& gen) {
    torch::NoGradGuard no_grad;
    std::vector<int64_t> seq(prompt.begin(), prompt.end());
    seq.insert(seq.end(), gen.begin(), gen.end());
    torch::Tensor logp =
        torch::log_softmax(model_.Forward(torch::tensor(seq).view({1, -1}))[0], -1);  // (T, V)
    std::vector<float> out;
    for (size_t i = 0; i < gen.size(); ++i) {
      out.push_back(logp[static_cast<int64_t>(prompt.size() + i - 1)][gen[i]].item<float>());
    }
    return out;
  }

  std::unique_ptr<Tokenizer> tok_;
  LlamaModel model_;
  std::vector<int> prompt_;
};

TEST_F(SamplerTest, GreedyIsDeterministicAndEqualsArgmaxChain) {
  tok_->stop_ids.clear();  // run the full length
  SampleParams p;
  p.temperature = 0.0;
  p.max_tokens = 12;
  p.seed = 1;
  auto a = Sample(model_, *tok_, prompt_, p);
  p.seed = 999;  // the seed does not matter for greedy
  auto b = Sample(model_, *tok_, prompt_, p);
  ASSERT_EQ(a.size(), 1u);
  ASSERT_EQ(a[0].token_ids.size(), 12u);
  EXPECT_EQ(a[0].token_ids, b[0].token_ids);
  EXPECT_EQ(a[0].finish_reason, "length");
  std::vector<int> chain = ArgmaxChain(prompt_, 12);
  EXPECT_EQ(a[0].token_ids, chain);
  EXPECT_EQ(a[0].text, tok_->Decode(chain, /*skip_special=*/true));
  // The chain is not degenerate (a random model still varies its output).
  std::set<int> distinct(chain.begin(), chain.end());
  EXPECT_GE(distinct.size(), 2u);
  // GreedyIds agrees.
  EXPECT_EQ(GreedyIds(model_, prompt_, {}, 12), chain);
  // With a stop id at the 4th greedy token, GreedyIds stops before it.
  std::vector<int> stop = {chain[3]};
  if (std::find(chain.begin(), chain.begin() + 3, chain[3]) == chain.begin() + 3) {
    EXPECT_EQ(GreedyIds(model_, prompt_, stop, 12), std::vector<int>(chain.begin(), chain.begin() + 3));
  }
}

TEST_F(SamplerTest, StopIdEndsSampleAndIsKeptOutOfText) {
  tok_->stop_ids.clear();
  SampleParams p;
  p.temperature = 0.0;
  p.max_tokens = 12;
  std::vector<int> chain = Sample(model_, *tok_, prompt_, p)[0].token_ids;
  // Pick the first greedy token that did not occur before it as the stop id.
  size_t k = 1;
  while (k < chain.size() && std::find(chain.begin(), chain.begin() + static_cast<long>(k), chain[k]) !=
                                 chain.begin() + static_cast<long>(k))
    ++k;
  ASSERT_LT(k, chain.size());
  tok_->stop_ids = {chain[k]};
  auto out = Sample(model_, *tok_, prompt_, p)[0];
  EXPECT_EQ(out.finish_reason, "stop");
  EXPECT_EQ(out.token_ids, std::vector<int>(chain.begin(), chain.begin() + static_cast<long>(k) + 1));
  EXPECT_EQ(out.logprobs.size(), out.token_ids.size());
  EXPECT_EQ(out.text,
            tok_->Decode(std::vector<int>(chain.begin(), chain.begin() + static_cast<long>(k)), true));
}

TEST_F(SamplerTest, SeedsReproduceAndDiffer) {
  tok_->stop_ids.clear();
  SampleParams p;
  p.temperature = 1.0;
  p.max_tokens = 16;
  p.seed = 42;
  auto a = Sample(model_, *tok_, prompt_, p)[0];
  auto b = Sample(model_, *tok_, prompt_, p)[0];
  EXPECT_EQ(a.token_ids, b.token_ids);
  EXPECT_EQ(a.logprobs, b.logprobs);
  EXPECT_EQ(a.text, b.text);
  p.seed = 43;
  auto c = Sample(model_, *tok_, prompt_, p)[0];
  EXPECT_NE(a.token_ids, c.token_ids);
}

TEST_F(SamplerTest, LogProbsAreRawLogSoftmax) {
  tok_->stop_ids.clear();
  for (double temperature : {0.0, 0.7, 1.5}) {
    SCOPED_TRACE(temperature);
    SampleParams p;
    p.temperature = temperature;
    p.top_k = temperature == 0.7 ? 20 : 0;
    p.top_p = temperature == 1.5 ? 0.9 : 1.0;
    p.max_tokens = 10;
    p.seed = 5;
    auto out = Sample(model_, *tok_, prompt_, p)[0];
    ASSERT_EQ(out.token_ids.size(), 10u);
    ASSERT_EQ(out.logprobs.size(), 10u);
    std::vector<float> want = FullLogProbs(prompt_, out.token_ids);
    for (size_t i = 0; i < want.size(); ++i) {
      EXPECT_NEAR(out.logprobs[i], want[i], 1e-5 * std::max(1.0f, std::abs(want[i]))) << "step " << i;
      EXPECT_LT(out.logprobs[i], 0.0f);
    }
  }
}

TEST_F(SamplerTest, TopKOneIsGreedy) {
  tok_->stop_ids.clear();
  SampleParams greedy;
  greedy.temperature = 0.0;
  greedy.max_tokens = 10;
  SampleParams k1;
  k1.temperature = 1.3;
  k1.top_k = 1;
  k1.max_tokens = 10;
  for (uint64_t seed : {0, 1, 2}) {
    k1.seed = seed;
    EXPECT_EQ(Sample(model_, *tok_, prompt_, k1)[0].token_ids,
              Sample(model_, *tok_, prompt_, greedy)[0].token_ids);
  }
  // A tiny top_p keeps only the most likely token: greedy too.
  SampleParams p_small;
  p_small.temperature = 1.0;
  p_small.top_p = 1e-6;
  p_small.max_tokens = 10;
  EXPECT_EQ(Sample(model_, *tok_, prompt_, p_small)[0].token_ids,
            Sample(model_, *tok_, prompt_, greedy)[0].token_ids);
}

TEST_F(SamplerTest, TopKRestrictsChoices) {
  tok_->stop_ids.clear();
  SampleParams p;
  p.temperature = 2.0;  // flat: without top-k most tokens would be out of the top 3
  p.top_k = 3;
  p.max_tokens = 8;
  p.n = 4;
  p.seed = 8;
  auto outs = Sample(model_, *tok_, prompt_, p);
  torch::NoGradGuard no_grad;
  for (const auto& o : outs) {
    std::vector<int64_t> seq(prompt_.begin(), prompt_.end());
    for (int tok : o.token_ids) {
      torch::Tensor logits = model_.Forward(torch::tensor(seq).view({1, -1}))[0][-1];
      torch::Tensor top = std::get<1>(logits.topk(3));
      EXPECT_TRUE((top == tok).any().item<bool>()) << "token " << tok << " not in the top 3";
      seq.push_back(tok);
    }
  }
}

TEST_F(SamplerTest, NSamples) {
  tok_->stop_ids.clear();
  SampleParams p;
  p.temperature = 1.0;
  p.max_tokens = 9;
  p.n = 3;
  p.seed = 3;
  auto outs = Sample(model_, *tok_, prompt_, p);
  ASSERT_EQ(outs.size(), 3u);
  for (const auto& o : outs) {
    EXPECT_EQ(o.token_ids.size(), 9u);
    EXPECT_EQ(o.finish_reason, "length");
    // Each row of the batched cache gives that row's own log-probabilities.
    std::vector<float> want = FullLogProbs(prompt_, o.token_ids);
    for (size_t i = 0; i < want.size(); ++i)
      EXPECT_NEAR(o.logprobs[i], want[i], 1e-5 * std::max(1.0f, std::abs(want[i])));
  }
  EXPECT_FALSE(outs[0].token_ids == outs[1].token_ids && outs[1].token_ids == outs[2].token_ids)
      << "three samples at temperature 1 should not all be identical";
  // n greedy samples are all the greedy chain.
  p.temperature = 0.0;
  outs = Sample(model_, *tok_, prompt_, p);
  ASSERT_EQ(outs.size(), 3u);
  std::vector<int> chain = ArgmaxChain(prompt_, 9);
  for (const auto& o : outs) EXPECT_EQ(o.token_ids, chain);
}

TEST_F(SamplerTest, MaxTokensGivesLength) {
  tok_->stop_ids.clear();
  for (int64_t max_tokens : {1, 5}) {
    SampleParams p;
    p.temperature = 0.8;
    p.max_tokens = max_tokens;
    p.seed = 4;
    auto out = Sample(model_, *tok_, prompt_, p)[0];
    EXPECT_EQ(static_cast<int64_t>(out.token_ids.size()), max_tokens);
    EXPECT_EQ(static_cast<int64_t>(out.logprobs.size()), max_tokens);
    EXPECT_EQ(out.finish_reason, "length");
    EXPECT_EQ(out.text, tok_->Decode(out.token_ids, true));
  }
  // The model's context caps max_tokens.
  LlamaModel small = model_;
  small.config.max_position_embeddings = static_cast<int64_t>(prompt_.size()) + 3;
  SampleParams p;
  p.temperature = 0.0;
  p.max_tokens = 50;
  auto out = Sample(small, *tok_, prompt_, p)[0];
  EXPECT_EQ(out.token_ids.size(), 3u);
  EXPECT_EQ(out.finish_reason, "length");
}

TEST_F(SamplerTest, StopStringCutsText) {
  tok_->stop_ids.clear();
  SampleParams p;
  p.temperature = 0.0;
  p.max_tokens = 24;
  auto full = Sample(model_, *tok_, prompt_, p)[0];
  ASSERT_EQ(full.token_ids.size(), 24u);
  const std::string& text = full.text;
  // A printable ASCII character that first appears after some text.
  size_t pos = std::string::npos;
  for (size_t i = 1; i < text.size(); ++i) {
    unsigned char ch = static_cast<unsigned char>(text[i]);
    if (ch >= 0x21 && ch < 0x7f && text.find(text[i]) == i) {
      pos = i;
      break;
    }
  }
  ASSERT_NE(pos, std::string::npos) << "no ASCII stop candidate in: " << text;
  const std::string stop(1, text[pos]);
  // The token whose decoding first contains the stop string.
  size_t k = 0;
  while (k < full.token_ids.size() &&
         tok_->Decode(
                 std::vector<int>(full.token_ids.begin(), full.token_ids.begin() + static_cast<long>(k) + 1),
                 true)
                 .find(stop) == std::string::npos)
    ++k;
  ASSERT_LT(k, full.token_ids.size());

  p.stop = {"@@never@@", stop};
  auto out = Sample(model_, *tok_, prompt_, p)[0];
  EXPECT_EQ(out.finish_reason, "stop");
  EXPECT_EQ(out.text, text.substr(0, pos));
  EXPECT_EQ(out.text.find(stop), std::string::npos);
  EXPECT_EQ(out.token_ids,
            std::vector<int>(full.token_ids.begin(), full.token_ids.begin() + static_cast<long>(k) + 1));
  EXPECT_LT(out.token_ids.size(), full.token_ids.size());

  // A stop string that never appears changes nothing.
  p.stop = {"@@never@@"};
  auto same = Sample(model_, *tok_, prompt_, p)[0];
  EXPECT_EQ(same.token_ids, full.token_ids);
  EXPECT_EQ(same.finish_reason, "length");
}

// Streaming: the deltas of each sample add up to its final text, one call per
// token plus the final one, with stop strings (held back until decided) and
// without; and streaming changes nothing about the samples.
TEST_F(SamplerTest, StreamedDeltasConcatenateToTheText) {
  tok_->stop_ids.clear();
  SampleParams p;
  p.temperature = 0.8;
  p.seed = 5;
  p.max_tokens = 24;
  p.n = 3;
  auto plain = Sample(model_, *tok_, prompt_, p);
  const std::string stop = plain[0].text.size() > 4 ? plain[0].text.substr(2, 2) : "@@";
  for (const std::vector<std::string>& stops :
       {std::vector<std::string>{}, std::vector<std::string>{stop, "@@x"}}) {
    SCOPED_TRACE(stops.empty() ? "no stop strings" : "stop \"" + stop + "\"");
    p.stop = stops;
    auto expected = Sample(model_, *tok_, prompt_, p);
    std::vector<std::string> text(3);
    std::vector<int> tokens(3, 0), finals(3, 0);
    std::vector<std::string> reasons(3);
    p.on_delta = [&](int64_t i, const std::string& delta, int token, float, const TokenAlternatives&,
                     const std::string& reason) {
      text[i] += delta;
      if (token >= 0)
        ++tokens[i];
      else {
        ++finals[i];
        reasons[i] = reason;
      }
    };
    auto streamed = Sample(model_, *tok_, prompt_, p);
    p.on_delta = nullptr;
    for (size_t i = 0; i < 3; ++i) {
      EXPECT_EQ(streamed[i].token_ids, expected[i].token_ids);
      EXPECT_EQ(text[i], expected[i].text) << i;
      EXPECT_EQ(tokens[i], static_cast<int>(expected[i].token_ids.size())) << i;
      EXPECT_EQ(finals[i], 1) << i;
      EXPECT_EQ(reasons[i], expected[i].finish_reason) << i;
    }
  }
}

TEST_F(SamplerTest, ShouldStopEndsEverySampleWhereItIs) {
  tok_->stop_ids.clear();
  SampleParams p;
  p.temperature = 0.0;
  p.max_tokens = 20;
  p.n = 2;
  const auto full = Sample(model_, *tok_, prompt_, p);
  int asked = 0;
  p.should_stop = [&] { return ++asked > 3; };
  std::vector<std::string> reasons(2);
  p.on_delta = [&](int64_t i, const std::string&, int token, float, const TokenAlternatives&,
                   const std::string& reason) {
    if (token < 0) reasons[static_cast<size_t>(i)] = reason;
  };
  const auto cut = Sample(model_, *tok_, prompt_, p);
  for (size_t i = 0; i < 2; ++i) {
    ASSERT_EQ(cut[i].token_ids.size(), 3u) << "three tokens, then the stop";
    EXPECT_EQ(cut[i].finish_reason, "cancelled");
    EXPECT_EQ(reasons[i], "cancelled") << "the stream's last piece says so";
    EXPECT_EQ(std::vector<int>(full[i].token_ids.begin(), full[i].token_ids.begin() + 3), cut[i].token_ids);
    EXPECT_EQ(cut[i].text, tok_->Decode(cut[i].token_ids, true));
  }
}

TEST_F(SamplerTest, StopStringAtTheStartGivesEmptyText) {
  tok_->stop_ids.clear();
  SampleParams p;
  p.temperature = 0.0;
  p.max_tokens = 8;
  auto full = Sample(model_, *tok_, prompt_, p)[0];
  ASSERT_FALSE(full.token_ids.empty());
  // The first generated token's own text is the stop string: it matches at
  // offset 0, so the sample's text is empty.
  std::string first = tok_->Decode({full.token_ids[0]}, true);
  ASSERT_FALSE(first.empty());
  p.stop = {first};
  auto out = Sample(model_, *tok_, prompt_, p)[0];
  EXPECT_EQ(out.finish_reason, "stop");
  EXPECT_EQ(out.token_ids, std::vector<int>{full.token_ids[0]});
  EXPECT_EQ(out.text, "") << "the text must be cut before the stop string";
}

TEST_F(SamplerTest, InvalidParams) {
  SampleParams p;
  p.n = 0;
  ExpectBurstError([&] { Sample(model_, *tok_, prompt_, p); }, Code::kInvalidArgument);
  p = SampleParams();
  p.top_p = 0.0;
  ExpectBurstError([&] { Sample(model_, *tok_, prompt_, p); }, Code::kInvalidArgument);
  p = SampleParams();
  p.top_p = 1.5;
  ExpectBurstError([&] { Sample(model_, *tok_, prompt_, p); }, Code::kInvalidArgument);
  p = SampleParams();
  p.max_tokens = 0;
  ExpectBurstError([&] { Sample(model_, *tok_, prompt_, p); }, Code::kInvalidArgument);
  p = SampleParams();
  ExpectBurstError([&] { Sample(model_, *tok_, {}, p); }, Code::kInvalidArgument);
  // A prompt as long as the context.
  std::vector<int> long_prompt(static_cast<size_t>(model_.config.max_position_embeddings), 5);
  ExpectBurstError([&] { Sample(model_, *tok_, long_prompt, p); }, Code::kInvalidArgument);
  // Token ids outside the vocabulary (a client's prompt given as ids).
  for (int bad : {-1, static_cast<int>(model_.config.vocab_size)}) {
    std::vector<int> ids = prompt_;
    ids.push_back(bad);
    ExpectBurstError([&] { Sample(model_, *tok_, ids, p); }, Code::kInvalidArgument);
  }
  p.top_logprobs = kMaxTopLogprobs + 1;
  ExpectBurstError([&] { Sample(model_, *tok_, prompt_, p); }, Code::kInvalidArgument);
}

// top_logprobs: at each sampled position the k likeliest tokens of the raw
// distribution, likeliest first, the same whether streamed or not; under
// greedy decoding the first is the token taken, with its logprob.
TEST_F(SamplerTest, TopLogprobsAreTheLikeliestRawTokens) {
  tok_->stop_ids.clear();
  SampleParams p;
  p.temperature = 0.0;
  p.max_tokens = 6;
  p.top_logprobs = 5;
  std::vector<TokenAlternatives> streamed;
  p.on_delta = [&](int64_t, const std::string&, int token, float, const TokenAlternatives& top,
                   const std::string&) {
    if (token >= 0) streamed.push_back(top);
  };
  auto out = Sample(model_, *tok_, prompt_, p)[0];
  ASSERT_EQ(out.top_logprobs.size(), out.token_ids.size());
  EXPECT_EQ(streamed, out.top_logprobs);
  std::vector<int> context = prompt_;
  for (size_t i = 0; i < out.token_ids.size(); ++i) {
    const TokenAlternatives& top = out.top_logprobs[i];
    ASSERT_EQ(top.size(), 5u);
    EXPECT_EQ(top[0].first, out.token_ids[i]) << "greedy takes the likeliest";
    EXPECT_FLOAT_EQ(top[0].second, out.logprobs[i]);
    for (size_t j = 1; j < top.size(); ++j) EXPECT_GE(top[j - 1].second, top[j].second) << "likeliest first";
    // Each alternative's logprob is what the full forward gives it.
    for (const auto& [id, lp] : top) {
      std::vector<int> one = {id};
      EXPECT_NEAR(lp, FullLogProbs(context, one)[0], 1e-4) << "step " << i << " token " << id;
    }
    context.push_back(out.token_ids[i]);
  }
}

}  // namespace
}  // namespace burst
