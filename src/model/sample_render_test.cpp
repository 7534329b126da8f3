// The response shapes of api/sample_render.h for logprobs, from a worker's
// result as worker/samplers.h writes it: chat's content list with bytes and
// alternatives, and the completions' parallel lists with the prompt first
// under echo (what lm-evaluation-harness reads).
#include "model/sample_render.h"

#include <gtest/gtest.h>

namespace burst {
namespace {

// The worker's [[text, logprob], ...] (Json::array: a braced list of
// string-number pairs would read as an object).
Json Alternatives(std::initializer_list<std::pair<const char*, double>> top) {
  Json out = Json::array();
  for (const auto& [t, lp] : top) out.push_back(Json::array({t, lp}));
  return out;
}

Json WorkerResult() {
  return {{"prompt_tokens", 3},
          {"samples",
           {{{"text", " b"},
             {"token_ids", {7}},
             {"tokens", {" b"}},
             {"logprobs", {-0.5}},
             {"top_logprobs", Json::array({Alternatives({{" b", -0.5}, {" c", -1.5}})})},
             {"finish_reason", "length"}}}},
          {"prompt",
           {{"text", "x a"},
            {"tokens", {"<s>", "x", " a"}},
            {"logprobs", {nullptr, -2.0, -1.0}},
            {"top_logprobs", Json::array({nullptr, Alternatives({{"y", -0.1}, {"x", -2.0}}),
                                          Alternatives({{" a", -1.0}, {" a", -3.0}})})}}}};
}

TEST(SampleRender, EchoPutsThePromptFirstAsTheHarnessReadsIt) {
  const Json request = {{"prompt", "x a"}, {"logprobs", true}, {"top_logprobs", 2}, {"echo", true}};
  const Json r = RenderCompletion("cmpl-1", "m", request, WorkerResult(), 0, Json::object());
  const Json& c = r["choices"][0];
  EXPECT_EQ(c["text"], "x a b");
  const Json& lp = c["logprobs"];
  EXPECT_EQ(lp["tokens"], Json({"<s>", "x", " a", " b"}));
  EXPECT_EQ(lp["token_logprobs"], Json({nullptr, -2.0, -1.0, -0.5}));
  EXPECT_TRUE(lp["top_logprobs"][0].is_null()) << "the first token has no context";
  EXPECT_EQ(lp["top_logprobs"][1], Json({{"y", -0.1}, {"x", -2.0}}));
  EXPECT_EQ(lp["top_logprobs"][2], Json({{" a", -1.0}})) << "two ids that print alike keep the likelier";
  EXPECT_EQ(lp["top_logprobs"][3], Json({{" b", -0.5}, {" c", -1.5}}));
  // Offsets of the prompt's tokens as printed, then the sample's from the end of the echoed text.
  EXPECT_EQ(lp["text_offset"], Json({0, 3, 4, 3}));
  EXPECT_EQ(r["usage"]["prompt_tokens"], 3);
}

TEST(SampleRender, LogprobsZeroGivesTheSampledTokensOnly) {
  Json result = WorkerResult();
  result.erase("prompt");
  result["samples"][0].erase("top_logprobs");
  const Json r =
      RenderCompletion("cmpl-1", "m", Json{{"prompt", "x a"}, {"logprobs", true}}, result, 0, Json::object());
  const Json& lp = r["choices"][0]["logprobs"];
  EXPECT_EQ(r["choices"][0]["text"], " b");
  EXPECT_EQ(lp["tokens"], Json::array({" b"}));
  EXPECT_EQ(lp["token_logprobs"], Json::array({-0.5}));
  EXPECT_TRUE(lp["top_logprobs"].is_null());
  EXPECT_EQ(lp["text_offset"], Json::array({0}));
  const Json none = RenderCompletion("cmpl-1", "m", Json{{"prompt", "x a"}}, result, 0, Json::object());
  EXPECT_TRUE(none["choices"][0]["logprobs"].is_null());
}

TEST(SampleRender, ChatLogprobsCarryBytesAndAlternatives) {
  Json result = WorkerResult();
  result.erase("prompt");
  const Json r = RenderChatCompletion("chatcmpl-1", "m", Json{{"logprobs", true}, {"top_logprobs", 2}},
                                      result, 0, Json::object());
  const Json& content = r["choices"][0]["logprobs"]["content"];
  ASSERT_EQ(content.size(), 1u);
  EXPECT_EQ(content[0]["token"], " b");
  EXPECT_EQ(content[0]["bytes"], Json({32, 98}));
  EXPECT_EQ(content[0]["top_logprobs"][1], Json({{"token", " c"}, {"logprob", -1.5}, {"bytes", {32, 99}}}));
  EXPECT_EQ(r["choices"][0]["message"]["content"], " b");
  // Streamed, the same token in a chunk of its own.
  const Json piece = {{"index", 0},
                      {"delta", " b"},
                      {"token", " b"},
                      {"logprob", -0.5},
                      {"top", Alternatives({{" b", -0.5}, {" c", -1.5}})},
                      {"finish_reason", nullptr}};
  const Json chunk = RenderStreamChunk("chatcmpl-1", "m", Json{{"logprobs", true}, {"top_logprobs", 2}},
                                       piece, 0, true, false);
  EXPECT_EQ(chunk["choices"][0]["logprobs"]["content"][0], content[0]);
  EXPECT_EQ(chunk["choices"][0]["delta"]["content"], " b");
}

}  // namespace
}  // namespace burst
