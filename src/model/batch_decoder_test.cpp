// Tests of continuous batching (batch_decoder.h) on a random tiny model with
// the tiny-bpe fixture tokenizer: a per-row cache forward equals each
// sequence's own full forward; requests decoded together, joining as others
// finish, get what each gets alone; the cache grows in rows and positions
// under live requests; one request's stop leaves the others running.
#include "model/batch_decoder.h"

#include <gtest/gtest.h>

#include "model/test_util.h"

namespace burst {
namespace {

class BatchDecoderTest : public ::testing::Test {
 protected:
  void SetUp() override {
    torch::set_num_threads(1);
    tok_ = LoadTokenizer(std::filesystem::path(BURST_SOURCE_DIR) / "tests/fixtures/tiny-bpe");
    ASSERT_EQ(tok_->vocab_size(), 279);
    tok_->stop_ids.clear();  // samples end by length or stop strings here
    model_ = LlamaModel::Random(test_util::TinyConfig(279), 31, /*init_std=*/0.1);
    test_util::RandomizeNorms(model_, 32);
    for (const char* text : {"Hello there, how are you?", "The ticket says the printer is broken", "a",
                             "Refund my order please, it arrived late and damaged", "ok then"}) {
      prompts_.push_back(tok_->Encode(text));
      ASSERT_FALSE(prompts_.back().empty());
    }
  }

  // Request k's parameters: greedy and sampled, n 1..3, different lengths.
  SampleParams Params(size_t k) const {
    SampleParams p;
    p.temperature = k % 2 == 0 ? 0.0 : 0.9;
    p.top_k = k == 3 ? 20 : 0;
    p.top_p = k == 1 ? 0.9 : 1.0;
    p.seed = 100 + k;
    p.n = 1 + static_cast<int64_t>(k % 3);
    p.max_tokens = 4 + 5 * static_cast<int64_t>(k);
    return p;
  }

  static void ExpectSameSamples(const std::vector<SampleOutput>& got, const std::vector<SampleOutput>& want) {
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < got.size(); ++i) {
      SCOPED_TRACE("sample " + std::to_string(i));
      EXPECT_EQ(got[i].token_ids, want[i].token_ids);
      EXPECT_EQ(got[i].text, want[i].text);
      EXPECT_EQ(got[i].finish_reason, want[i].finish_reason);
      ASSERT_EQ(got[i].logprobs.size(), want[i].logprobs.size());
      for (size_t j = 0; j < got[i].logprobs.size(); ++j) {
        EXPECT_NEAR(got[i].logprobs[j], want[i].logprobs[j],
                    1e-5 * std::max(1.0f, std::abs(want[i].logprobs[j])));
      }
    }
  }

  std::unique_ptr<Tokenizer> tok_;
  LlamaModel model_;
  std::vector<std::vector<int>> prompts_;
};

// Rows at different positions in one forward: each row's logits are those
// of a full forward over that row's own sequence.
TEST_F(BatchDecoderTest, PerRowCacheForwardEqualsEachSequenceAlone) {
  torch::NoGradGuard no_grad;
  KVCache cache = model_.NewCache(3, 64);
  cache.lengths = {0, 0, 0};
  const std::vector<std::vector<int64_t>> seqs = {{5, 9, 14, 2, 7, 11, 3}, {8, 1}, {4, 4, 6, 30, 12}};
  for (int64_t r : {2, 0, 1}) {  // prefill each into its own row, out of order
    ForwardOptions fo;
    fo.rows = {r};
    const auto& s = seqs[static_cast<size_t>(r)];
    model_.Forward(torch::tensor(std::vector<int64_t>(s.begin(), s.end() - 1)).view({1, -1}), &cache, fo);
  }
  EXPECT_EQ(cache.lengths, (std::vector<int64_t>{6, 1, 4}));
  // The last token of each, together; then rows 0 and 2 only (row 1 sits).
  ForwardOptions all;
  torch::Tensor last = torch::tensor({seqs[0].back(), seqs[1].back(), seqs[2].back()}).view({3, 1});
  torch::Tensor batched = model_.Forward(last, &cache, all);  // (3, 1, V)
  for (size_t r = 0; r < 3; ++r) {
    torch::Tensor alone = model_.Forward(torch::tensor(seqs[r]).view({1, -1}))[0][-1];
    EXPECT_TRUE(torch::allclose(batched[static_cast<int64_t>(r)][0], alone, 1e-5, 1e-5)) << "row " << r;
  }
  ForwardOptions two;
  two.rows = {2, 0};
  torch::Tensor next = model_.Forward(torch::tensor({int64_t{17}, int64_t{21}}).view({2, 1}), &cache, two);
  EXPECT_EQ(cache.lengths, (std::vector<int64_t>{8, 2, 6}));
  std::vector<int64_t> s2 = seqs[2], s0 = seqs[0];
  s2.push_back(17);
  s0.push_back(21);
  EXPECT_TRUE(
      torch::allclose(next[0][0], model_.Forward(torch::tensor(s2).view({1, -1}))[0][-1], 1e-5, 1e-5));
  EXPECT_TRUE(
      torch::allclose(next[1][0], model_.Forward(torch::tensor(s0).view({1, -1}))[0][-1], 1e-5, 1e-5));
}

// Five requests through three rows: some wait, and join as others finish;
// each gets exactly what it gets sampled alone.
TEST_F(BatchDecoderTest, RequestsTogetherGetWhatEachGetsAlone) {
  std::vector<std::vector<SampleOutput>> alone;
  for (size_t k = 0; k < prompts_.size(); ++k) alone.push_back(Sample(model_, *tok_, prompts_[k], Params(k)));
  BatchDecoderOptions opt;
  opt.max_rows = 3;
  BatchDecoder d(model_, *tok_, opt);
  for (size_t k = 0; k < prompts_.size(); ++k)
    EXPECT_EQ(d.Add(prompts_[k], Params(k)), static_cast<int64_t>(k));
  std::map<int64_t, std::vector<SampleOutput>> got;
  bool waited = false, shared = false;
  int64_t steps = 0;
  while (d.Step()) {
    ++steps;
    EXPECT_LE(d.live_rows(), 3);
    waited |= d.waiting() > 0 && d.live_rows() > 0;
    shared |= d.live_rows() >= 2;
    for (auto& f : d.TakeFinished()) got[f.id] = std::move(f.samples);
  }
  for (auto& f : d.TakeFinished()) got[f.id] = std::move(f.samples);
  EXPECT_TRUE(waited) << "some requests waited for rows";
  EXPECT_TRUE(shared) << "rows of different requests decoded together";
  ASSERT_EQ(got.size(), prompts_.size());
  for (size_t k = 0; k < prompts_.size(); ++k) {
    SCOPED_TRACE("request " + std::to_string(k));
    ExpectSameSamples(got[static_cast<int64_t>(k)], alone[k]);
  }
  // Fewer steps than one request after another (the longest is 24 tokens).
  int64_t sequential = 0;
  for (size_t k = 0; k < prompts_.size(); ++k) sequential += Params(k).max_tokens;
  EXPECT_LT(steps, sequential);
  EXPECT_TRUE(d.idle());
}

// A request joining later with a longer prompt + max_tokens than the cache
// holds, and more samples than rows are free: the cache grows under the
// live request, which goes on undisturbed; n above max_rows runs alone.
TEST_F(BatchDecoderTest, CacheGrowsUnderLiveRequests) {
  SampleParams shortp = Params(0), longp = Params(4);
  shortp.max_tokens = 30;
  longp.n = 5;
  longp.max_tokens = 40;
  const auto want_short = Sample(model_, *tok_, prompts_[2], shortp);
  const auto want_long = Sample(model_, *tok_, prompts_[3], longp);
  BatchDecoderOptions opt;
  opt.max_rows = 4;
  BatchDecoder d(model_, *tok_, opt);
  d.Add(prompts_[2], shortp);
  ASSERT_TRUE(d.Step());
  ASSERT_TRUE(d.Step());
  EXPECT_EQ(d.rows(), 1);
  d.Add(prompts_[3], longp);  // 5 samples > max_rows 4: waits until it can run alone
  std::map<int64_t, std::vector<SampleOutput>> got;
  while (d.Step()) {
    EXPECT_TRUE(d.live_rows() <= 1 || d.live_rows() == 5) << d.live_rows();
    for (auto& f : d.TakeFinished()) got[f.id] = std::move(f.samples);
  }
  for (auto& f : d.TakeFinished()) got[f.id] = std::move(f.samples);
  EXPECT_EQ(d.rows(), 5);
  ExpectSameSamples(got[0], want_short);
  ExpectSameSamples(got[1], want_long);

  // Growth with both live: a second short request, then a long one that fits.
  BatchDecoder g(model_, *tok_, opt);
  longp.n = 3;
  const auto want_long3 = Sample(model_, *tok_, prompts_[3], longp);
  g.Add(prompts_[2], shortp);
  ASSERT_TRUE(g.Step());
  g.Add(prompts_[3], longp);
  got.clear();
  bool together = false;
  while (g.Step()) {
    together |= g.live_rows() == 4;
    for (auto& f : g.TakeFinished()) got[f.id] = std::move(f.samples);
  }
  for (auto& f : g.TakeFinished()) got[f.id] = std::move(f.samples);
  EXPECT_TRUE(together);
  ExpectSameSamples(got[0], want_short);
  ExpectSameSamples(got[1], want_long3);
}

// A request's should_stop ends it alone ("cancelled", what it had); the
// request beside it finishes as if alone, and a stream per request.
TEST_F(BatchDecoderTest, OneRequestStoppingLeavesTheOthers) {
  SampleParams a = Params(1), b = Params(2);
  a.max_tokens = b.max_tokens = 20;
  const auto want_b = Sample(model_, *tok_, prompts_[1], b);
  const auto full_a = Sample(model_, *tok_, prompts_[0], a);
  int asked = 0;
  a.should_stop = [&] { return ++asked > 4; };
  std::string streamed_b;
  b.on_delta = [&](int64_t i, const std::string& delta, int, float, const TokenAlternatives&,
                   const std::string&) {
    if (i == 0) streamed_b += delta;
  };
  BatchDecoder d(model_, *tok_);
  d.Add(prompts_[0], a);
  d.Add(prompts_[1], b);
  std::map<int64_t, std::vector<SampleOutput>> got;
  while (d.Step()) {
    for (auto& f : d.TakeFinished()) got[f.id] = std::move(f.samples);
  }
  for (auto& f : d.TakeFinished()) got[f.id] = std::move(f.samples);
  ASSERT_EQ(got[0].size(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_EQ(got[0][i].finish_reason, "cancelled");
    ASSERT_EQ(got[0][i].token_ids.size(), 4u);
    EXPECT_EQ(got[0][i].token_ids,
              std::vector<int>(full_a[i].token_ids.begin(), full_a[i].token_ids.begin() + 4));
  }
  ExpectSameSamples(got[1], want_b);
  EXPECT_EQ(streamed_b, want_b[0].text);
}

// Prompt logprobs and top-k come from the batched, padded prefill and equal
// a full forward over each prompt alone; a request that only scores its
// prompt (max_tokens 0) samples nothing, and the sampling requests beside
// it are unchanged.
TEST_F(BatchDecoderTest, PromptLogprobsFromTheBatchedPrefillEqualAForwardAlone) {
  torch::NoGradGuard no_grad;
  BatchDecoderOptions opt;
  opt.max_rows = 8;
  BatchDecoder d(model_, *tok_, opt);
  std::vector<int64_t> scored;
  for (size_t k = 0; k < prompts_.size(); ++k) {
    SampleParams p = Params(k);
    if (k == 2) continue;  // prompt "a" is one token: no logprobs to give (checked below)
    if (k % 2 == 1) {      // these score their prompt too; one of them only that
      p.prompt_logprobs = true;
      p.topk_prompt_logprobs = 3;
      if (k == 3) p.max_tokens = 0;
    }
    const int64_t id = d.Add(prompts_[k], p);
    if (k % 2 == 1) scored.push_back(id);
  }
  std::map<int64_t, FinishedRequest> got;
  while (d.Step()) {
    for (auto& f : d.TakeFinished()) got[f.id] = std::move(f);
  }
  for (auto& f : d.TakeFinished()) got[f.id] = std::move(f);
  const std::vector<size_t> order = {0, 1, 3, 4};  // the requests' prompts, by id
  for (size_t id = 0; id < order.size(); ++id) {
    const size_t k = order[id];
    SCOPED_TRACE("request " + std::to_string(id));
    const FinishedRequest& f = got.at(static_cast<int64_t>(id));
    const bool wants = k % 2 == 1;
    if (!wants) {
      EXPECT_TRUE(f.prompt_logprobs.empty());
      ExpectSameSamples(f.samples, Sample(model_, *tok_, prompts_[k], Params(k)));
      continue;
    }
    const std::vector<int>& prompt = prompts_[k];
    torch::Tensor lp = torch::log_softmax(
        model_.Forward(torch::tensor(std::vector<int64_t>(prompt.begin(), prompt.end())).view({1, -1}))[0],
        -1);
    ASSERT_EQ(f.prompt_logprobs.size(), prompt.size() - 1);
    ASSERT_EQ(f.topk_prompt_logprobs.size(), prompt.size() - 1);
    for (size_t i = 1; i < prompt.size(); ++i) {
      const torch::Tensor row = lp[static_cast<int64_t>(i) - 1];
      EXPECT_NEAR(f.prompt_logprobs[i - 1], row[prompt[i]].item<float>(), 1e-5) << "token " << i;
      auto [values, index] = row.topk(3);
      ASSERT_EQ(f.topk_prompt_logprobs[i - 1].size(), 3u);
      for (int64_t j = 0; j < 3; ++j) {
        EXPECT_EQ(f.topk_prompt_logprobs[i - 1][static_cast<size_t>(j)].first, index[j].item<int64_t>());
        EXPECT_NEAR(f.topk_prompt_logprobs[i - 1][static_cast<size_t>(j)].second, values[j].item<float>(),
                    1e-5);
      }
    }
    if (k == 3) {
      ASSERT_EQ(f.samples.size(), static_cast<size_t>(Params(k).n));
      for (const SampleOutput& o : f.samples) EXPECT_TRUE(o.token_ids.empty());
    } else {
      ExpectSameSamples(f.samples, Sample(model_, *tok_, prompt, Params(k)));
    }
  }
  // A one-token prompt has no logprobs; max_tokens 0 without them is refused.
  SampleParams one;
  one.prompt_logprobs = true;
  one.max_tokens = 0;
  ASSERT_EQ(prompts_[2].size(), 1u);
  BatchDecoder single(model_, *tok_);
  single.Add(prompts_[2], one);
  while (single.Step()) {
  }
  std::vector<FinishedRequest> done = single.TakeFinished();
  ASSERT_EQ(done.size(), 1u);
  EXPECT_TRUE(done[0].prompt_logprobs.empty());
  ASSERT_EQ(done[0].samples.size(), 1u);
  EXPECT_TRUE(done[0].samples[0].token_ids.empty());
  one.prompt_logprobs = false;
  test_util::ExpectBurstError([&] { d.Add(prompts_[0], one); }, Code::kInvalidArgument, {"max_tokens"});
}

// Prompts sharing a long prefix prefill it once (one row, its keys and
// values copied): every request still gets what it gets alone, samples and
// prompt logprobs.
TEST_F(BatchDecoderTest, PromptsSharingAPrefixGetWhatEachGetsAlone) {
  torch::NoGradGuard no_grad;
  std::vector<int> base;
  for (int i = 0; i < 30; ++i) base.push_back(3 + (i * 37) % 270);
  auto with = [&](size_t keep, std::vector<int> rest) {
    std::vector<int> p(base.begin(), base.begin() + static_cast<std::ptrdiff_t>(keep));
    p.insert(p.end(), rest.begin(), rest.end());
    return p;
  };
  const std::vector<std::vector<int>> prompts = {with(30, {5}), with(30, {7, 9, 11}),
                                                 prompts_[1],   with(30, {7, 9, 12, 40}),
                                                 with(20, {3}), with(30, {})};
  BatchDecoderOptions opt;
  opt.max_rows = 16;
  BatchDecoder d(model_, *tok_, opt);
  std::vector<SampleParams> params;
  for (size_t k = 0; k < prompts.size(); ++k) {
    SampleParams p = Params(k % 5);
    p.prompt_logprobs = k % 2 == 0;
    params.push_back(p);
    d.Add(prompts[k], p);
  }
  std::map<int64_t, FinishedRequest> got;
  while (d.Step()) {
    for (auto& f : d.TakeFinished()) got[f.id] = std::move(f);
  }
  for (auto& f : d.TakeFinished()) got[f.id] = std::move(f);
  for (size_t k = 0; k < prompts.size(); ++k) {
    SCOPED_TRACE("request " + std::to_string(k));
    BatchDecoder alone(model_, *tok_, opt);
    alone.Add(prompts[k], params[k]);
    while (alone.Step()) {
    }
    FinishedRequest want = std::move(alone.TakeFinished().at(0));
    const FinishedRequest& f = got.at(static_cast<int64_t>(k));
    ExpectSameSamples(f.samples, want.samples);
    ASSERT_EQ(f.prompt_logprobs.size(), want.prompt_logprobs.size());
    EXPECT_EQ(f.prompt_logprobs.size(), params[k].prompt_logprobs ? prompts[k].size() - 1 : 0u);
    for (size_t i = 0; i < f.prompt_logprobs.size(); ++i) {
      EXPECT_NEAR(f.prompt_logprobs[i], want.prompt_logprobs[i], 1e-5) << "token " << i;
    }
  }
}

// Two groups of shared prefixes, one long with short rests, one short with
// long rests, and little to sample: the cache holds just the prompts, and
// each rest's forward spans only its own positions.
TEST_F(BatchDecoderTest, SharedPrefixesOfDifferentLengthsFitTheCache) {
  std::vector<int> a, b;
  for (int i = 0; i < 60; ++i) {
    a.push_back(3 + (i * 37) % 270);
    b.push_back(5 + (i * 53) % 270);
  }
  std::vector<std::vector<int>> prompts = {a, a, b, b};
  prompts[1].back() = 7;                                          // shares 59 tokens with a
  for (size_t i = 16; i < 60; ++i) prompts[3][i] = 3 + (i % 11);  // shares 16 with b
  SampleParams p;
  p.max_tokens = 2;
  p.temperature = 0.0;
  BatchDecoderOptions opt;
  opt.max_rows = 8;
  BatchDecoder d(model_, *tok_, opt);
  for (const auto& prompt : prompts) d.Add(prompt, p);
  std::map<int64_t, FinishedRequest> got;
  while (d.Step()) {
    for (auto& f : d.TakeFinished()) got[f.id] = std::move(f);
  }
  for (auto& f : d.TakeFinished()) got[f.id] = std::move(f);
  ASSERT_EQ(got.size(), prompts.size());
  for (size_t k = 0; k < prompts.size(); ++k) {
    ExpectSameSamples(got.at(static_cast<int64_t>(k)).samples, Sample(model_, *tok_, prompts[k], p));
  }
}

TEST_F(BatchDecoderTest, AddRefusesBadParameters) {
  BatchDecoder d(model_, *tok_);
  SampleParams p;
  p.n = 0;
  test_util::ExpectBurstError([&] { d.Add(prompts_[0], p); }, Code::kInvalidArgument,
                              {"n must be at least 1"});
  p.n = 1;
  test_util::ExpectBurstError([&] { d.Add({}, p); }, Code::kInvalidArgument, {"the prompt is empty"});
  EXPECT_TRUE(d.idle());
  EXPECT_FALSE(d.Step());
}

}  // namespace
}  // namespace burst
