// OpenAI's Batch API end to end: OpenAI's Python SDK against a real `burst
// serve` and its `burst worker`s (tests/reference/openai_batch.py), and a
// batch whose worker is killed (SIGKILL) mid-way: the next attempt answers
// only the lines not yet answered, and every line is answered once.
#include <csignal>
#include <set>

#include "jobs_fixture.h"

namespace burst::e2e::jobs {
namespace {

// Every custom_id of `lines` once: the count of each.
std::map<std::string, int> CustomIds(const std::string& jsonl) {
  std::map<std::string, int> seen;
  for (const std::string& l : Lines(jsonl)) {
    if (l.empty()) continue;
    ++seen[Json::parse(l).value("custom_id", "")];
  }
  return seen;
}

TEST(BatchesTest, TheOpenAIPythonClientRunsABatch) {
  Server s(kFastFlags);
  s.Start();
  Json o =
      RunOpenAIClient("http://127.0.0.1:" + std::to_string(s.port()) + "/v1", s.admin().key,
                      {BURST_PYTHON, (SourceDir() / "tests/reference/openai_batch.py").string(), "24"}, 300);
  ASSERT_FALSE(o.empty());

  EXPECT_EQ(o["file"]["purpose"], "batch");
  EXPECT_EQ(o["created"]["object"], "batch");
  EXPECT_EQ(o["created"]["total"], 25);
  const Json& b = o["batch"];
  ASSERT_EQ(b["status"], "completed") << o.dump();
  EXPECT_EQ(b["counts"], (Json{{"total", 25}, {"completed", 24}, {"failed", 1}})) << o.dump();
  EXPECT_EQ(b["metadata"], (Json{{"team", "support"}}));
  EXPECT_TRUE(b["in_progress_at"].is_number() && b["completed_at"].is_number()) << b.dump();
  EXPECT_EQ(o["output_file"], "batch_output");
  // Each good line answered once, in the output file; the bad one in the error file.
  ASSERT_EQ(o["output"].size(), 24u) << o.dump();
  std::set<std::string> ids;
  int64_t in = 0, out = 0;
  for (const Json& x : o["output"]) {
    ids.insert(x["custom_id"].get<std::string>());
    EXPECT_EQ(x["status"], 200);
    EXPECT_EQ(x["object"], "chat.completion");
    in += x["usage"]["prompt_tokens"].get<int64_t>();
    out += x["usage"]["completion_tokens"].get<int64_t>();
  }
  EXPECT_EQ(ids.size(), 24u);
  ASSERT_EQ(o["errors"].size(), 1u) << o.dump();
  EXPECT_EQ(o["errors"][0]["custom_id"], "bad-temperature");
  EXPECT_EQ(o["errors"][0]["status"], 400);
  EXPECT_EQ(o["errors"][0]["error"]["param"], "temperature") << o["errors"].dump();
  EXPECT_EQ(b["usage"]["input_tokens"], in);
  EXPECT_EQ(b["usage"]["output_tokens"], out);
  EXPECT_NE(std::find(o["listed"].begin(), o["listed"].end(), b["id"]), o["listed"].end());
  EXPECT_EQ(o["cancelled"]["status"], "cancelled");
  ASSERT_TRUE(o["wrong_endpoint"].is_object()) << o.dump();
  EXPECT_EQ(o["wrong_endpoint"]["status"], 400);

  // Billed once, on the usage line "batch", at the batch prices (serverless
  // scope: --price-batch-prefill-per-mtok 0.01, --price-batch-sample-per-mtok 0.025).
  const Json usage = s.GetOk("/v1/usage");
  double cost = 0;
  int64_t tokens = 0;
  for (const Json& l : usage["data"]) {
    if (l.value("line", "") != "batch") continue;
    cost += l.value("cost", 0.0);
    tokens += l.value("tokens", int64_t{0});
  }
  EXPECT_EQ(tokens, in + out) << usage.dump();
  EXPECT_NEAR(cost, in / 1e6 * 0.01 + out / 1e6 * 0.025, 1e-12) << usage.dump();
}

TEST(BatchesTest, AKilledWorkersBatchGoesOnFromItsAnsweredParts) {
  Server s(kFastFlags);
  s.Start();
  std::string input;
  const int n = 320;  // five parts of 64 lines
  for (int i = 0; i < n; ++i) {
    input += Json{{"custom_id", "line-" + std::to_string(i)},
                  {"method", "POST"},
                  {"url", "/v1/completions"},
                  {"body",
                   {{"model", "burst-small"},
                    {"prompt", "Ticket " + std::to_string(i) + ": my card was charged twice"},
                    {"max_tokens", 24},
                    {"seed", i}}}}
                 .dump() +
             "\n";
  }
  const std::string file = s.Upload("batch.jsonl", input, "", "batch");
  Resp created =
      s.Post("/v1/batches",
             {{"input_file_id", file}, {"endpoint", "/v1/completions"}, {"completion_window", "24h"}});
  ASSERT_EQ(created.status, 200) << created.Describe();
  const std::string id = created.body["id"];
  // Kill once a part is written and before the last one is.
  bool ready = false;
  WaitUntil(
      [&] {
        Json b = s.GetOk("/v1/batches/" + id);
        const int64_t done = b["request_counts"]["completed"].get<int64_t>();
        ready = b["status"] == "in_progress" && done >= 64 && done < n - 64;
        return ready || b["status"] == "completed";
      },
      120, 20);
  ASSERT_TRUE(ready) << "no point between the first and the last part was seen" << s.Diagnose(id);
  Json w = s.WorkerOf(id);
  ASSERT_TRUE(w.is_object()) << s.Diagnose(id);
  ::kill(static_cast<pid_t>(w["pid"].get<int64_t>()), SIGKILL);

  Json b;
  ASSERT_TRUE(WaitUntil(
      [&] {
        b = s.GetOk("/v1/batches/" + id);
        return b["status"] == "completed" || b["status"] == "failed";
      },
      240, 100))
      << s.Diagnose(id);
  ASSERT_EQ(b["status"], "completed") << b.dump() << s.Diagnose(id);
  EXPECT_EQ(b["request_counts"], (Json{{"total", n}, {"completed", n}, {"failed", 0}}));
  // Every line answered exactly once.
  Resp content = s.Get("/v1/files/" + b["output_file_id"].get<std::string>() + "/content");
  ASSERT_EQ(content.status, 200) << content.Describe();
  const auto seen = CustomIds(content.raw);
  EXPECT_EQ(seen.size(), static_cast<size_t>(n));
  for (const auto& [cid, count] : seen) EXPECT_EQ(count, 1) << cid;
  EXPECT_TRUE(b["error_file_id"].is_null());
  // The second attempt went on from the parts the first wrote.
  const Json events = s.Events(id);
  bool resumed = false;
  for (const Json& e : events) resumed |= Contains(e.value("message", ""), "resuming:");
  EXPECT_TRUE(resumed) << events.dump();
}

}  // namespace
}  // namespace burst::e2e::jobs
