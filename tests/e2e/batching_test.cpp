// End-to-end tests of batched decoding: a real `burst serve` (one slot of
// one thread) and its real `burst worker`, spoken to over HTTP. Concurrent
// calls on one deployment replica, and on the pool's one worker, are decoded
// as one batch (each response says how many calls shared it) and answer what
// each answers alone; a streamed call gets its usage last when asked; a
// caller leaving one streamed call of a batch stops that call only.
#include <gtest/gtest.h>
#include <httplib.h>

#include <set>
#include <thread>

#include "e2e_http.h"

namespace burst::e2e {
namespace {

class BatchingTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    server_ =
        new ServeProcess("burst-e2e-batching", {"--slots", "1", "--threads-per-slot", "1",
                                                "--scaledown-window", "30", "--org-max-min-replicas", "1"});
    if (!server_->error().empty()) start_error_ = server_->error();
  }
  static void TearDownTestSuite() {
    delete server_;
    server_ = nullptr;
  }
  void SetUp() override { ASSERT_TRUE(start_error_.empty()) << start_error_; }

  static Resp Send(const std::string& method, const std::string& path, const Json& body = Json()) {
    return server_->Send(method, path, body);
  }
  // Call k of a set: its own ticket and seed, sampled at temperature 0.8.
  static Json ChatBody(const std::string& model, int k, int64_t max_tokens) {
    static const char* kTickets[] = {
        "My order has not arrived. Where is it?", "I was charged twice this month.",
        "The app crashes when I log in.",         "Please close my account.",
        "Can I return a damaged lamp?",           "Your support team was great, thanks!"};
    return {{"model", model},
            {"messages", {{{"role", "user"}, {"content", kTickets[k % 6]}}}},
            {"temperature", 0.8},
            {"seed", 100 + k},
            {"max_tokens", max_tokens}};
  }
  // `n` calls at once; their responses in call order.
  static std::vector<Resp> AtOnce(const std::string& model, int n, int64_t max_tokens) {
    std::vector<Resp> out(static_cast<size_t>(n));
    std::vector<std::thread> threads;
    for (int k = 0; k < n; ++k) {
      threads.emplace_back([&, k] {
        out[static_cast<size_t>(k)] = Send("POST", "/v1/chat/completions", ChatBody(model, k, max_tokens));
      });
    }
    for (auto& t : threads) t.join();
    return out;
  }

  static ServeProcess* server_;
  static std::string start_error_;
};

ServeProcess* BatchingTest::server_ = nullptr;
std::string BatchingTest::start_error_;

// Four calls at once on the pool's single worker: they share its batch, and
// each answers the text it answers alone.
TEST_F(BatchingTest, ConcurrentCallsShareOneWorkersBatchAndAnswerAsAlone) {
  std::vector<Resp> alone;
  for (int k = 0; k < 4; ++k) {
    alone.push_back(Send("POST", "/v1/chat/completions", ChatBody("burst-small", k, 48)));
    ASSERT_EQ(alone.back().status, 200) << alone.back().Describe();
    EXPECT_EQ(alone.back().body["burst"]["batch_peak"], 1) << "one call at a time decodes alone";
  }
  std::vector<Resp> together = AtOnce("burst-small", 4, 48);
  int64_t peak = 0;
  std::set<std::string> workers;
  for (int k = 0; k < 4; ++k) {
    ASSERT_EQ(together[k].status, 200) << together[k].Describe();
    peak = std::max<int64_t>(peak, together[k].body["burst"]["batch_peak"].get<int64_t>());
    workers.insert(together[k].body["burst"]["worker"].get<std::string>());
    EXPECT_EQ(together[k].body["choices"][0]["message"]["content"],
              alone[k].body["choices"][0]["message"]["content"])
        << "call " << k;
    EXPECT_EQ(together[k].body["usage"], alone[k].body["usage"]) << "call " << k;
  }
  EXPECT_EQ(workers.size(), 1u) << "one slot: one worker served them all";
  EXPECT_GE(peak, 2) << "the calls were decoded together";
}

// A replica with max_concurrency 3 decodes three calls together; a stream
// asked with include_usage ends with the usage chunk.
TEST_F(BatchingTest, AReplicaDecodesUpToMaxConcurrencyTogether) {
  Resp created = Send("POST", "/v1/deployments",
                      {{"name", "batcher"},
                       {"checkpoint", "burst-small"},
                       {"min_replicas", 1},
                       {"max_replicas", 1},
                       {"max_concurrency", 3},
                       {"scaledown_window_s", 60},
                       {"scope", "dedicated"}});
  ASSERT_EQ(created.status, 200) << created.Describe();
  ASSERT_TRUE(WaitUntil(
      [] { return Send("GET", "/v1/deployments/batcher").body.value("ready_replicas", 0) == 1; }, 60));
  std::vector<Resp> together = AtOnce("batcher", 3, 40);
  int64_t peak = 0;
  for (const Resp& r : together) {
    ASSERT_EQ(r.status, 200) << r.Describe();
    EXPECT_EQ(r.body["burst"]["deployment"], "batcher");
    peak = std::max<int64_t>(peak, r.body["burst"]["batch_peak"].get<int64_t>());
  }
  EXPECT_GE(peak, 2);
  EXPECT_LE(peak, 3) << "never more than max_concurrency";

  Json body = ChatBody("batcher", 1, 12);
  Resp plain = Send("POST", "/v1/chat/completions", body);
  ASSERT_EQ(plain.status, 200) << plain.Describe();
  body["stream"] = true;
  body["stream_options"] = {{"include_usage", true}};
  Resp st = Send("POST", "/v1/chat/completions", body);
  ASSERT_EQ(st.status, 200) << st.Describe();
  std::vector<Json> events;
  for (const std::string& line : Lines(st.raw)) {
    if (line.rfind("data: {", 0) == 0) events.push_back(Json::parse(line.substr(6)));
  }
  ASSERT_GE(events.size(), 2u) << st.raw;
  const Json& last = events.back();
  EXPECT_TRUE(last["choices"].empty()) << last.dump();
  EXPECT_EQ(last["usage"], plain.body["usage"]) << "the same call unstreamed";
  EXPECT_GT(last["usage"]["completion_tokens"].get<int64_t>(), 0);
  for (size_t i = 0; i + 1 < events.size(); ++i)
    EXPECT_TRUE(events[i]["usage"].is_null()) << events[i].dump();
  Resp bad = Send(
      "POST", "/v1/chat/completions",
      {{"model", "batcher"}, {"messages", body["messages"]}, {"stream_options", {{"include_usage", 1}}}});
  EXPECT_EQ(bad.status, 400) << bad.Describe();
  EXPECT_EQ(bad.body["error"]["param"], "stream_options.include_usage") << bad.raw;
  ASSERT_EQ(Send("DELETE", "/v1/deployments/batcher").status, 200);
}

// One streamed call of a batch whose caller leaves stops; the call beside
// it finishes with all its tokens.
TEST_F(BatchingTest, ACallerLeavingStopsItsCallOnly) {
  const Resp alone = Send("POST", "/v1/chat/completions", ChatBody("burst-small", 2, 200));
  ASSERT_EQ(alone.status, 200) << alone.Describe();
  Resp other;
  std::thread beside([&] { other = Send("POST", "/v1/chat/completions", ChatBody("burst-small", 2, 200)); });
  // A stream read until its first event, then dropped.
  Json body = ChatBody("burst-small", 3, 400);
  body["stream"] = true;
  const std::string raw = body.dump();
  Raw client(server_->port());
  ASSERT_TRUE(client.ok());
  ASSERT_TRUE(client.Send("POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " +
                          server_->key() + "\r\nContent-Type: application/json\r\nContent-Length: " +
                          std::to_string(raw.size()) + "\r\n\r\n" + raw));
  const std::string first = client.ReadUntil("data: {", 30'000);
  ASSERT_NE(first.find("data: {"), std::string::npos) << first;
  client.Close();
  beside.join();
  ASSERT_EQ(other.status, 200) << other.Describe();
  EXPECT_EQ(other.body["choices"][0]["message"]["content"], alone.body["choices"][0]["message"]["content"])
      << "the call beside ran on, as alone";
  EXPECT_EQ(other.body["usage"], alone.body["usage"]);
  EXPECT_GE(other.body["burst"]["batch_peak"].get<int64_t>(), 2) << other.raw;
}

// Logprobs through the real worker. The legacy completions endpoint scores
// a prompt given as token ids the way lm-evaluation-harness asks (echo,
// logprobs, max_tokens 0): each prompt position's distribution, from the
// prefill's full logits, is the one a call sampling right after that prefix
// sees (the last-position path). Chat's top_logprobs under greedy decoding
// start with the token taken.
TEST_F(BatchingTest, LogprobsScoreThePromptAndListAlternatives) {
  Resp tok = Send("POST", "/v1/tokenize", {{"model", "burst-small"}, {"text", "A cat is a small animal"}});
  ASSERT_EQ(tok.status, 200) << tok.Describe();
  const Json ids = tok.body["tokens"];
  ASSERT_GE(ids.size(), 4u);
  Resp scored = Send("POST", "/v1/completions",
                     {{"model", "burst-small"},
                      {"prompt", Json::array({ids})},
                      {"echo", true},
                      {"logprobs", 3},
                      {"max_tokens", 0},
                      {"temperature", 0}});
  ASSERT_EQ(scored.status, 200) << scored.Describe();
  const Json& lp = scored.body["choices"][0]["logprobs"];
  ASSERT_EQ(lp["tokens"].size(), ids.size()) << scored.raw;
  ASSERT_EQ(lp["token_logprobs"].size(), ids.size());
  EXPECT_TRUE(lp["token_logprobs"][0].is_null()) << "the first token has no context";
  EXPECT_EQ(scored.body["usage"]["completion_tokens"], 0);
  for (size_t k = 1; k < ids.size(); ++k) {
    SCOPED_TRACE("position " + std::to_string(k));
    EXPECT_LT(lp["token_logprobs"][k].get<double>(), 0.0);
    Json prefix = Json::array();
    for (size_t i = 0; i < k; ++i) prefix.push_back(ids[i]);
    Resp next = Send("POST", "/v1/completions",
                     {{"model", "burst-small"},
                      {"prompt", prefix},
                      {"logprobs", 3},
                      {"max_tokens", 1},
                      {"temperature", 0}});
    ASSERT_EQ(next.status, 200) << next.Describe();
    const Json& there = next.body["choices"][0]["logprobs"]["top_logprobs"][0];
    const Json& here = lp["top_logprobs"][k];
    ASSERT_EQ(there.size(), here.size()) << there << " vs " << here;
    for (const auto& [text, value] : here.items()) {
      ASSERT_TRUE(there.contains(text)) << text << ": " << there;
      EXPECT_NEAR(value.get<double>(), there[text].get<double>(), 1e-4) << text;
    }
  }
  // Echo with a sampled token: the prompt's text, then the sample's.
  Resp echoed = Send("POST", "/v1/completions",
                     {{"model", "burst-small"},
                      {"prompt", "A cat is"},
                      {"echo", true},
                      {"logprobs", 0},
                      {"max_tokens", 2},
                      {"temperature", 0}});
  ASSERT_EQ(echoed.status, 200) << echoed.Describe();
  const std::string text = echoed.body["choices"][0]["text"];
  EXPECT_EQ(text.rfind("A cat is", 0), 0u) << text;
  EXPECT_EQ(echoed.body["choices"][0]["logprobs"]["tokens"].size(),
            echoed.body["usage"]["prompt_tokens"].get<size_t>() +
                echoed.body["usage"]["completion_tokens"].get<size_t>());

  Json chat = ChatBody("burst-small", 0, 6);
  chat["temperature"] = 0;
  chat["logprobs"] = true;
  chat["top_logprobs"] = 4;
  Resp c = Send("POST", "/v1/chat/completions", chat);
  ASSERT_EQ(c.status, 200) << c.Describe();
  const Json& content = c.body["choices"][0]["logprobs"]["content"];
  ASSERT_EQ(content.size(), c.body["usage"]["completion_tokens"].get<size_t>());
  for (const Json& t : content) {
    ASSERT_EQ(t["top_logprobs"].size(), 4u) << t;
    EXPECT_EQ(t["top_logprobs"][0]["token"], t["token"]) << "greedy takes the likeliest";
    EXPECT_NEAR(t["top_logprobs"][0]["logprob"].get<double>(), t["logprob"].get<double>(), 1e-6);
  }

  Resp bad = Send("POST", "/v1/completions", {{"model", "burst-small"}, {"prompt", {1, 99999999}}});
  EXPECT_EQ(bad.status, 400) << bad.Describe();
  EXPECT_EQ(bad.body["error"]["param"], "prompt") << bad.raw;
}

// The clients users point at an OpenAI-compatible base URL
// (tests/reference/clients_flow.mjs): the newest `openai` package (chat with
// logprobs, a stream with its usage chunk, echo, models), LangChain's
// ChatOpenAI (invoke, stream, batch) and the AI SDK's OpenAI-compatible
// provider (generateText, streamText), each against this server; at
// temperature 0 all answer what Burst's own path answers.
TEST_F(BatchingTest, TheClientsUsersPointAtBurstWork) {
  const fs::path ref = SourceDir() / "tests/reference";
  for (const char* pkg : {"openai-latest", "@langchain/openai", "ai", "@ai-sdk/openai-compatible"}) {
    if (!fs::exists(ref / "node_modules" / pkg) || std::system("node --version >/dev/null 2>&1") != 0) {
      GTEST_SKIP() << "the npm package " << pkg << " is not installed (scripts/install-npm-deps.sh)";
    }
  }
  Json chat = ChatBody("burst-small", 0, 8);
  chat["temperature"] = 0;
  const Resp own = Send("POST", "/v1/chat/completions", chat);
  ASSERT_EQ(own.status, 200) << own.Describe();
  const Json answer = own.body["choices"][0]["message"]["content"];
  const Json o =
      RunOpenAIClient(server_->url() + "/v1", server_->key(),
                      {"/usr/bin/env", "node", (ref / "clients_flow.mjs").string(), "burst-small"});
  ASSERT_FALSE(o.empty());
  SCOPED_TRACE(o.dump(1));

  const Json& ai = o["openai"];
  EXPECT_EQ(ai["content"], answer);
  EXPECT_EQ(ai["streamed"], answer);
  EXPECT_EQ(ai["stream_usage"], ai["usage"]) << "the usage chunk of include_usage";
  EXPECT_EQ(ai["logprobs"], ai["usage"]["completion_tokens"]);
  EXPECT_EQ(ai["top_logprobs"], 2);
  EXPECT_EQ(ai["echo_text"].get<std::string>().rfind("A cat is", 0), 0u);
  EXPECT_TRUE(ai["echo_first"].is_null()) << "the prompt's first token has no logprob";
  EXPECT_GT(ai["echo_tokens"].get<int64_t>(), 2);
  EXPECT_NE(std::find(ai["models"].begin(), ai["models"].end(), Json("burst-small")), ai["models"].end());
  EXPECT_EQ(ai["retrieved"], "burst-small");

  const Json& lc = o["langchain"];
  EXPECT_EQ(lc["content"], answer);
  EXPECT_EQ(lc["streamed"], answer) << "LangChain streams with stream_options";
  EXPECT_GT(lc["chunks"].get<int64_t>(), 1);
  EXPECT_EQ(lc["usage"]["output_tokens"], own.body["usage"]["completion_tokens"]);
  ASSERT_EQ(lc["batch"].size(), 2u);
  EXPECT_EQ(lc["batch"][0], answer);

  const Json& sdk = o["ai_sdk"];
  EXPECT_EQ(sdk["content"], answer);
  EXPECT_EQ(sdk["streamed"], answer);
  EXPECT_EQ(sdk["usage"]["outputTokens"], own.body["usage"]["completion_tokens"]);
  EXPECT_EQ(sdk["stream_usage"]["outputTokens"], own.body["usage"]["completion_tokens"]);
}

}  // namespace
}  // namespace burst::e2e
