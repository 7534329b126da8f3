// What ParseSampleRequest (api/sample_request.h) accepts of OpenAI's chat and
// completions bodies as clients send them, and the 400s, each naming its
// field, for what Burst does not do yet.
#include "api/sample_request.h"

#include <gtest/gtest.h>

#include <set>

namespace burst {
namespace {

std::string RefusedField(const Json& body, bool chat = true) {
  Status s = Try([&] { ParseSampleRequest(body, chat); });
  EXPECT_EQ(s.code(), Code::kInvalidArgument) << body.dump();
  return s.param();
}

Json Chat(const Json& messages) { return {{"model", "burst-small"}, {"messages", messages}}; }

TEST(SampleRequest, DeveloperIsSystemAndTextPartsAreJoined) {
  Json out = ParseSampleRequest(
      Chat({{{"role", "developer"}, {"content", "Be brief."}},
            {{"role", "user"},
             {"content", {{{"type", "text"}, {"text", "Hello"}}, {{"type", "text"}, {"text", "there"}}}}}}),
      true);
  ASSERT_EQ(out["messages"].size(), 2u);
  EXPECT_EQ(out["messages"][0]["role"], "system");
  EXPECT_EQ(out["messages"][0]["content"], "Be brief.");
  EXPECT_EQ(out["messages"][1]["content"], "Hello\nthere");
}

// chat_template_kwargs (vLLM's name): variables for the model's own
// template, passed on; names the renderer sets and other shapes are 400.
TEST(SampleRequest, ChatTemplateKwargsPassOnOrAreRefusedByName) {
  Json body = Chat({{{"role", "user"}, {"content", "Hi"}}});
  body["chat_template_kwargs"] = {{"enable_thinking", false}};
  EXPECT_EQ(ParseSampleRequest(body, true)["chat_template_kwargs"], Json({{"enable_thinking", false}}));
  body["chat_template_kwargs"] = {{"messages", Json::array()}};
  EXPECT_EQ(RefusedField(body), "chat_template_kwargs.messages");
  body["chat_template_kwargs"] = "enable_thinking";
  EXPECT_EQ(RefusedField(body), "chat_template_kwargs");
  Json many = Json::object();
  for (int i = 0; i < 33; ++i) many["v" + std::to_string(i)] = i;
  body["chat_template_kwargs"] = many;
  EXPECT_EQ(RefusedField(body), "chat_template_kwargs");
}

TEST(SampleRequest, PartsOtherThanTextAreRefusedByName) {
  Json image = {{"type", "image_url"}, {"image_url", {{"url", "data:image/png;base64,AAAA"}}}};
  EXPECT_EQ(RefusedField(Chat(
                {{{"role", "user"}, {"content", {{{"type", "text"}, {"text", "What is it?"}}, image}}}})),
            "messages[0].content[1].type");
  EXPECT_EQ(RefusedField(Chat({{{"role", "user"}, {"content", Json::array()}}})), "messages[0].content");
  EXPECT_EQ(RefusedField(Chat({{{"role", "user"}, {"content", {"plain string in a list"}}}})),
            "messages[0].content[0]");
  EXPECT_EQ(RefusedField(
                Chat({{{"role", "user"}, {"content", {{{"type", "text"}, {"text", "x"}, {"extra", 1}}}}}})),
            "messages[0].content[0].extra");
  EXPECT_EQ(RefusedField(Chat({{{"role", "tool"}, {"content", "42"}}})), "messages[0].role");
}

TEST(SampleRequest, ToolsAndStructuredOutputAreRefusedUntilTheyExist) {
  Json body = Chat({{{"role", "user"}, {"content", "Hi"}}});
  Json tools = body;
  tools["tools"] = {{{"type", "function"}, {"function", {{"name", "f"}}}}};
  EXPECT_EQ(RefusedField(tools), "tools");
  Json json_mode = body;
  json_mode["response_format"] = {{"type", "json_object"}};
  EXPECT_EQ(RefusedField(json_mode), "response_format");
  Json forced = body;
  forced["tool_choice"] = "required";
  EXPECT_EQ(RefusedField(forced), "tool_choice");
  Json audio = body;
  audio["modalities"] = {"text", "audio"};
  EXPECT_EQ(RefusedField(audio), "modalities");
  // Their off values, as clients send them by default, pass.
  Json off = body;
  off["tools"] = Json::array();
  off["tool_choice"] = "none";
  off["response_format"] = {{"type", "text"}};
  off["modalities"] = {"text"};
  off["parallel_tool_calls"] = false;
  EXPECT_NO_THROW(ParseSampleRequest(off, true));
  Json completion = {
      {"model", "burst-small"}, {"prompt", "Hi"}, {"response_format", {{"type", "json_object"}}}};
  EXPECT_EQ(RefusedField(completion, false), "response_format");
}

// No seed: a fresh one each call (sampling at temperature 1 then differs
// from call to call, as with OpenAI); a given one is kept.
TEST(SampleRequest, ACallWithoutASeedDrawsOne) {
  Json body = Chat({{{"role", "user"}, {"content", "Hi"}}});
  std::set<int64_t> seeds;
  for (int i = 0; i < 8; ++i) {
    const Json out = ParseSampleRequest(body, true);
    ASSERT_TRUE(out["seed"].is_number_integer());
    const int64_t seed = out["seed"].get<int64_t>();
    EXPECT_GE(seed, 0);
    EXPECT_LT(seed, int64_t{1} << 31);
    seeds.insert(seed);
  }
  EXPECT_GE(seeds.size(), 7u) << "eight draws of 31 bits";
  body["seed"] = 42;
  EXPECT_EQ(ParseSampleRequest(body, true)["seed"], 42);
}

TEST(SampleRequest, StreamOptionsAskForTheUsageChunk) {
  Json body = Chat({{{"role", "user"}, {"content", "Hi"}}});
  body["stream"] = true;
  body["stream_options"] = {{"include_usage", true}};
  EXPECT_TRUE(ParseSampleRequest(body, true).value("include_usage", false));
  body["stream_options"] = {{"include_usage", "yes"}};
  EXPECT_EQ(RefusedField(body), "stream_options.include_usage");
}

// Logprobs as each endpoint asks for them: chat's bool with top_logprobs,
// the completions' count of alternatives with echo (lm-evaluation-harness's
// loglikelihood request: token ids, echo, logprobs 1, max_tokens 0 or 1).
TEST(SampleRequest, LogprobsTopLogprobsAndEcho) {
  Json chat = Chat({{{"role", "user"}, {"content", "Hi"}}});
  chat["logprobs"] = true;
  chat["top_logprobs"] = 3;
  Json out = ParseSampleRequest(chat, true);
  EXPECT_TRUE(out["logprobs"].get<bool>());
  EXPECT_EQ(out["top_logprobs"], 3);
  chat["top_logprobs"] = 21;
  EXPECT_EQ(RefusedField(chat), "top_logprobs");
  chat["top_logprobs"] = 2;
  chat["logprobs"] = false;
  EXPECT_EQ(RefusedField(chat), "top_logprobs") << "alternatives need logprobs: true";

  Json harness = {{"model", "burst-small"}, {"prompt", {{5, 6, 7}}}, {"echo", true},
                  {"logprobs", 1},          {"max_tokens", 0},       {"temperature", 0}};
  out = ParseSampleRequest(harness, false);
  EXPECT_EQ(out["prompt_ids"], Json({5, 6, 7}));
  EXPECT_FALSE(out.contains("prompt"));
  EXPECT_TRUE(out["echo"].get<bool>());
  EXPECT_EQ(out["top_logprobs"], 1);
  EXPECT_EQ(out["max_tokens"], 0);
  Json plain = harness;
  plain.erase("logprobs");
  EXPECT_EQ(RefusedField(plain, false), "max_tokens") << "0 new tokens only to score the prompt";
  Json streamed = harness;
  streamed["stream"] = true;
  EXPECT_EQ(RefusedField(streamed, false), "echo");
  Json bad_id = harness;
  bad_id["prompt"] = {5, -1};
  EXPECT_EQ(RefusedField(bad_id, false), "prompt[1]");
  bad_id["prompt"] = {5, "x"};
  EXPECT_EQ(RefusedField(bad_id, false), "prompt[1]");
  bad_id["prompt"] = Json::array();
  EXPECT_EQ(RefusedField(bad_id, false), "prompt");
  bad_id["prompt"] = {"one", "two"};
  EXPECT_EQ(RefusedField(bad_id, false), "prompt") << "one prompt per request";
  Json many = harness;
  many["logprobs"] = 21;
  EXPECT_EQ(RefusedField(many, false), "logprobs");
  many["logprobs"] = true;
  EXPECT_EQ(RefusedField(many, false), "logprobs") << "a count, not a bool, on /v1/completions";
}

}  // namespace
}  // namespace burst
