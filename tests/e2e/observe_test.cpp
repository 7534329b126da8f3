// End-to-end tests of what operators watch on a real `burst serve` (with
// its real `burst worker`): GET /metrics behind its token, parsed by the
// official Prometheus client's parser (prometheus-client in the project's .venv),
// counters that move with the work; and the access log, as JSON lines with
// `--log-format json`, each naming the request id its answer carried.
#include <gtest/gtest.h>
#include <httplib.h>

#include <chrono>
#include <thread>

#include "e2e_http.h"

namespace burst::e2e {
namespace {

// The samples of a scrape, as the official Prometheus client's parser reads
// them (tests/reference/prom_parse.py): "name" or "name{k=v,...}" (labels
// sorted) -> value; a histogram as its _bucket, _sum and _count samples.
std::map<std::string, double> Scrape(const ServeProcess& s, const std::string& token) {
  httplib::Client c("127.0.0.1", s.port());
  auto r = c.Get("/metrics", {{"Authorization", "Bearer " + token}});
  EXPECT_TRUE(r);
  if (!r) return {};
  EXPECT_EQ(r->status, 200) << r->body;
  EXPECT_EQ(r->get_header_value("Content-Type").rfind("text/plain; version=0.0.4", 0), 0u);
  const fs::path in = s.dir() / "scrape.txt";
  WriteText(in, r->body);
  Process parser({"/bin/sh", "-c",
                  std::string(BURST_PYTHON) + " " + (SourceDir() / "tests/reference/prom_parse.py").string() +
                      " < " + in.string()});
  ProcResult p = parser.Wait(30);
  EXPECT_TRUE(p.ok()) << p.Describe() << "\n" << r->body;
  Json samples = Json::parse(p.out, nullptr, false);
  EXPECT_TRUE(samples.is_array()) << p.out;
  std::map<std::string, double> out;
  if (!samples.is_array()) return out;
  for (const Json& m : samples) {
    std::string key = m["name"], labels;
    for (const auto& [k, v] : m["labels"].items())
      labels += (labels.empty() ? "" : ",") + k + "=" + v.get<std::string>();
    if (!labels.empty()) key += "{" + labels + "}";
    out[key] = m["value"].get<double>();
  }
  return out;
}

TEST(Observe, MetricsParseAndMoveWithTheWorkAndTheAccessLogIsJson) {
  ServeProcess s("burst-e2e-observe", {"--slots", "1", "--threads-per-slot", "1", "--log-format", "json"});
  ASSERT_TRUE(s.error().empty()) << s.error();
  std::string token = Slurp(s.dir() / "data" / "metrics.token");
  while (!token.empty() && token.back() == '\n') token.pop_back();
  ASSERT_EQ(token.rfind("burst-metrics-", 0), 0u) << token;
  EXPECT_EQ(fs::status(s.dir() / "data" / "metrics.token").permissions() & fs::perms::all,
            fs::perms::owner_read | fs::perms::owner_write);

  // The token only: no token, an API key, or a wrong one are 401.
  httplib::Client c("127.0.0.1", s.port());
  for (const std::string& bearer : {std::string(), s.key(), token + "x"}) {
    auto r = bearer.empty() ? c.Get("/metrics") : c.Get("/metrics", {{"Authorization", "Bearer " + bearer}});
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 401) << r->body;
    EXPECT_EQ(r->body.find("burst_"), std::string::npos);
  }

  const auto before = Scrape(s, token);
  const std::string models_200 = "burst_http_requests_total{method=GET,route=/v1/models,status=200}";
  EXPECT_EQ(before.count(models_200), 0u);
  auto listed = c.Get("/v1/models", {{"Authorization", "Bearer " + s.key()}});
  ASSERT_TRUE(listed);
  ASSERT_EQ(listed->status, 200);
  const std::string request_id = listed->get_header_value("X-Request-Id");
  EXPECT_EQ(request_id.rfind("req-", 0), 0u) << request_id;
  Resp sampled = s.Send("POST", "/v1/completions",
                        {{"model", "burst-small"}, {"prompt", "A cat is"}, {"max_tokens", 3}});
  ASSERT_EQ(sampled.status, 200) << sampled.Describe();
  EXPECT_EQ(s.Send("GET", "/v1/models/no-such-model").status, 404);

  // A request is counted once its answer is written, which the client may
  // see first: scrape until the last one is there (each scrape counts a GET
  // /metrics of its own, which the checks below do not look at).
  const std::vector<std::string> counted = {
      models_200, "burst_http_requests_total{method=GET,route=/v1/models/{},status=404}",
      "burst_http_requests_total{method=POST,route=/v1/completions,status=200}",
      "burst_http_request_duration_seconds_count{route=/v1/completions}"};
  const auto all_counted = [&](const std::map<std::string, double>& m) {
    for (const std::string& k : counted)
      if (!m.count(k)) return false;
    return true;
  };
  auto after = Scrape(s, token);
  for (int i = 0; i < 50 && !all_counted(after); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    after = Scrape(s, token);
  }
  const auto at = [&](const std::string& k) { return after.count(k) ? after.at(k) : -1.0; };
  EXPECT_EQ(at(models_200), 1) << "one GET /v1/models";
  EXPECT_EQ(at("burst_http_requests_total{method=GET,route=/v1/models/{},status=404}"), 1);
  EXPECT_EQ(at("burst_http_requests_total{method=POST,route=/v1/completions,status=200}"), 1);
  EXPECT_EQ(at("burst_http_request_duration_seconds_count{route=/v1/completions}"), 1);
  EXPECT_EQ(at("burst_http_request_duration_seconds_bucket{le=+Inf,route=/v1/completions}"), 1);
  EXPECT_EQ(at("burst_http_requests_total{method=GET,route=/metrics,status=401}"), 3);
  EXPECT_EQ(at("burst_dispatch_seconds_count{kind=sample}"), 1);
  EXPECT_GE(at("burst_worker_cold_start_seconds_count"), 1) << "the call started a worker";
  const auto workers = [&](const std::string& state) {
    const std::string key = "burst_workers{device=cpu,state=" + state + "}";
    return after.count(key) ? after.at(key) : 0.0;
  };
  EXPECT_EQ(workers("idle") + workers("busy"), 1) << "the worker is live";
  double billed = 0;
  for (const auto& [k, v] : after) {
    if (k.rfind("burst_billed_seconds_total", 0) == 0) billed += v;
  }
  EXPECT_GT(billed, 0) << "the worker's startup went to the ledger";

  // The access log: one JSON object a line, the request's id as its answer said.
  Json line;
  ASSERT_TRUE(WaitUntil(
      [&] {
        for (const std::string& l : Lines(s.Output())) {
          if (l.find(request_id) == std::string::npos) continue;
          line = Json::parse(l, nullptr, false);
          return true;
        }
        return false;
      },
      10));
  ASSERT_TRUE(line.is_object()) << line;
  EXPECT_EQ(line["event"], "access");
  EXPECT_EQ(line["method"], "GET");
  EXPECT_EQ(line["route"], "/v1/models");
  EXPECT_EQ(line["path"], "/v1/models");
  EXPECT_EQ(line["status"], 200);
  EXPECT_GE(line["duration_ms"].get<double>(), 0.0);
  EXPECT_EQ(line["org"].get<std::string>().rfind("org-", 0), 0u) << line;
  EXPECT_EQ(line["remote"], "127.0.0.1");
  for (const std::string& l : Lines(s.Output())) {
    EXPECT_EQ(l.find("/internal/v1/lease"), std::string::npos) << "the workers' polls are not logged: " << l;
  }
}

}  // namespace
}  // namespace burst::e2e
