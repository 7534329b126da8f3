// End-to-end tests of the dashboard `burst serve` serves at / (web/,
// compiled into the binary): its files and headers over HTTP, then the page
// in a real browser (Debian's chromium through puppeteer-core,
// tests/reference/dashboard_flow.mjs) watching a real job train on real
// workers, with every figure it shows checked against the API. The
// screenshots land in BUILD/dashboard-shots/.
#include <gtest/gtest.h>
#include <httplib.h>

#include <cstdio>

#include "e2e_http.h"

namespace burst::e2e {
namespace {

// "$0.0123" as the page prints money; -1 when it is not that.
double Dollars(const Json& shown) {
  const std::string s = shown.is_string() ? shown.get<std::string>() : "";
  EXPECT_EQ(s.rfind('$', 0), 0u) << shown;
  if (s.rfind('$', 0) != 0) return -1;
  return std::stod(s.substr(1));
}
std::string Fixed4(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.4f", v);
  return buf;
}

// Every page of a list (events, checkpoints) through ?after=.
std::vector<Json> All(const ServeProcess& s, const std::string& path, const std::string& cursor = "id") {
  std::vector<Json> out;
  std::string after;
  for (int page = 0; page < 100; ++page) {
    const char sep = path.find('?') == std::string::npos ? '?' : '&';
    Resp r = s.Send("GET", path + sep + "limit=100" + (after.empty() ? "" : "&after=" + after));
    EXPECT_EQ(r.status, 200) << path << ": " << r.Describe();
    if (r.status != 200 || r.body["data"].empty()) break;
    for (const Json& x : r.body["data"]) out.push_back(x);
    const Json& last = r.body["data"].back()[cursor];
    after = last.is_string() ? last.get<std::string>() : last.dump();
    if (!r.body.value("has_more", false)) break;
  }
  return out;
}

TEST(Dashboard, FilesAreServedWithTheirHeadersAndNothingElse) {
  ServeProcess s("burst-e2e-dashboard-files", {"--slots", "1", "--threads-per-slot", "1"});
  ASSERT_TRUE(s.error().empty()) << s.error();
  httplib::Client c("127.0.0.1", s.port());
  // The page itself needs no key (it asks for one); it is the API that does.
  auto index = c.Get("/");
  ASSERT_TRUE(index);
  ASSERT_EQ(index->status, 200) << index->body;
  EXPECT_EQ(index->get_header_value("Content-Type"), "text/html; charset=utf-8");
  const std::string csp = index->get_header_value("Content-Security-Policy");
  EXPECT_NE(csp.find("script-src 'self'"), std::string::npos) << csp;
  EXPECT_NE(csp.find("connect-src 'self'"), std::string::npos) << csp;
  EXPECT_NE(csp.find("frame-ancestors 'none'"), std::string::npos) << csp;
  EXPECT_EQ(index->get_header_value("X-Content-Type-Options"), "nosniff");
  EXPECT_EQ(index->body, Slurp(SourceDir() / "web/index.html"))
      << "the page is web/index.html, byte for byte";
  EXPECT_EQ(index->body.find("<script>"), std::string::npos) << "no inline script (the CSP would refuse it)";

  auto js = c.Get("/dashboard/app.js");
  ASSERT_TRUE(js);
  ASSERT_EQ(js->status, 200);
  EXPECT_EQ(js->get_header_value("Content-Type"), "text/javascript; charset=utf-8");
  EXPECT_EQ(js->body, Slurp(SourceDir() / "web/app.js"));
  const std::string etag = js->get_header_value("ETag");
  ASSERT_FALSE(etag.empty());
  auto again = c.Get("/dashboard/app.js", {{"If-None-Match", etag}});
  ASSERT_TRUE(again);
  EXPECT_EQ(again->status, 304);
  EXPECT_TRUE(again->body.empty());
  auto changed = c.Get("/dashboard/app.js", {{"If-None-Match", "\"other\""}});
  ASSERT_TRUE(changed);
  EXPECT_EQ(changed->status, 200);
  EXPECT_EQ(c.Get("/dashboard/app.css")->get_header_value("Content-Type"), "text/css; charset=utf-8");

  // Only the compiled-in files: nothing from the disk, however it is named.
  for (const std::string path :
       {"/dashboard/nope.js", "/dashboard/..%2F..%2Fdata%2Fadmin.key", "/dashboard/../data/admin.key",
        "/dashboard/", "/dashboard/index.html%00.js", "/index.html"}) {
    auto r = c.Get(path);
    ASSERT_TRUE(r) << path;
    // A NUL in the path is refused as malformed before any route.
    EXPECT_EQ(r->status, path.find("%00") != std::string::npos ? 400 : 404) << path << ": " << r->body;
    EXPECT_EQ(r->body.find("burst-"), std::string::npos) << path << " leaks a key";
  }
  auto post = c.Post("/", "x", "text/plain");
  ASSERT_TRUE(post);
  EXPECT_EQ(post->status, 405);
}

TEST(Dashboard, ABrowserWatchesAJobTrainAndShowsWhatTheApiSays) {
  const fs::path ref = SourceDir() / "tests/reference";
  if (!fs::exists(ref / "node_modules/puppeteer-core") ||
      std::system("node --version >/dev/null 2>&1") != 0) {
    GTEST_SKIP() << "puppeteer-core is not installed (scripts/install-npm-deps.sh)";
  }
  if (!fs::exists("/usr/bin/chromium"))
    GTEST_SKIP() << "chromium is not installed (scripts/install-deps.sh installs it)";
  ServeProcess s("burst-e2e-dashboard",
                 {"--slots", "2", "--threads-per-slot", "1", "--scaledown-window", "5"});
  ASSERT_TRUE(s.error().empty()) << s.error();
  {
    httplib::Client c("127.0.0.1", s.port());
    auto uplot = c.Get("/dashboard/uPlot.iife.min.js");
    ASSERT_TRUE(uplot);
    if (uplot->status == 404)
      GTEST_SKIP() << "this binary was built without uPlot (scripts/install-npm-deps.sh web)";
  }
  WriteHead(SupportTrain(), s.dir() / "train.jsonl", 48);
  WriteHead(SupportValid(), s.dir() / "valid.jsonl", 8);
  const std::string train = s.Upload(s.dir() / "train.jsonl"), valid = s.Upload(s.dir() / "valid.jsonl");
  ASSERT_FALSE(train.empty());
  ASSERT_FALSE(valid.empty());
  // Long enough to be seen running (60 steps), with evals and checkpoints.
  Resp job = s.Send("POST", "/v1/fine_tuning/jobs",
                    {{"model", "burst-small"},
                     {"training_file", train},
                     {"validation_file", valid},
                     {"suffix", "dash"},
                     {"recipe",
                      {{"epochs", 5},
                       {"max_steps", 60},
                       {"batch_size", 4},
                       {"max_seq_len", 128},
                       {"eval_every", 20},
                       {"checkpoint_every", 30}}}});
  ASSERT_EQ(job.status, 200) << job.Describe();
  const std::string job_id = job.body["id"];
  Json tiny = {
      {"model", "burst-small"},
      {"training_file", train},
      {"validation_file", valid},
      {"recipe", {{"max_steps", 6}, {"batch_size", 4}, {"max_seq_len", 128}, {"checkpoint_every", 6}}}};
  Resp sweep = s.Send("POST", "/v1/sweeps",
                      {{"job", tiny}, {"runs", {{{"learning_rate", 0.0005}}, {{"learning_rate", 0.002}}}}});
  ASSERT_EQ(sweep.status, 200) << sweep.Describe();
  const std::string sweep_id = sweep.body["id"];

  const fs::path shots = fs::path(BurstBinary()).parent_path().parent_path() / "dashboard-shots";
  Process node({"/usr/bin/env", "node", (ref / "dashboard_flow.mjs").string(), s.url(), s.key(), job_id,
                sweep_id, shots.string()});
  ProcResult r = node.Wait(420);
  ASSERT_TRUE(r.ok()) << r.Describe();
  Json o = Json::parse(r.out, nullptr, false);
  ASSERT_TRUE(o.is_object()) << r.out;
  EXPECT_TRUE(o["console"].empty()) << "script errors, CSP refusals or failed loads: "
                                    << o["console"].dump(1);
  EXPECT_TRUE(o["asked_for_key"].get<bool>());
  EXPECT_TRUE(o["wrong_key_refused"].get<bool>());
  EXPECT_TRUE(o["signed_out"].get<bool>());
  EXPECT_GE(o["jobs_listed"].get<int>(), 3) << "the job and the sweep's two runs";

  // Watched while running, the chart grew.
  int running_min = -1, running_max = -1;
  for (const Json& p : o["polls"]) {
    if (p["status"] != "running") continue;
    const int n = p["points"];
    if (running_min < 0) running_min = n;
    running_max = n;
  }
  EXPECT_GE(running_min, 0) << "never seen running: " << o["polls"].dump();
  EXPECT_GT(running_max, running_min) << "the chart did not grow while the job ran: " << o["polls"].dump();

  // What the job page showed is what the API says.
  Resp final_job = s.Send("GET", "/v1/fine_tuning/jobs/" + job_id);
  ASSERT_EQ(final_job.body["status"], "succeeded") << final_job.Describe();
  const Json& shown = o["job"];
  EXPECT_EQ(shown["status"], "succeeded");
  EXPECT_EQ(shown["step"], "60/60");
  std::vector<Json> train_events, evals;
  for (const Json& e : All(s, "/v1/fine_tuning/jobs/" + job_id + "/events?order=asc")) {
    if (e.value("type", "") != "metrics") continue;
    (e["data"]["type"] == "train" ? train_events : evals).push_back(e["data"]);
  }
  ASSERT_EQ(train_events.size(), 60u);
  ASSERT_GE(evals.size(), 3u) << "step 0 (the base model), every 20 steps and the end";
  EXPECT_EQ(evals.front()["step"], 0);
  EXPECT_EQ(shown["train_loss"], Fixed4(train_events.back()["train_loss"]));
  EXPECT_EQ(shown["valid_loss"], Fixed4(evals.back()["eval_loss"]));
  EXPECT_EQ(shown["baseline"], Fixed4(evals.front()["eval_loss"]));
  EXPECT_NE(shown["baseline"], shown["valid_loss"]) << "the fine-tuned model is not the base model";
  // A run's cost is fixed once it ends, but for the idle time of its worker
  // until that scales down (billed to the run): what the page showed lies
  // between the cost less that idle time and the cost now.
  Json usage = s.Send("GET", "/v1/usage").body;
  double job_cost = -1, job_idle = 0;
  for (const Json& run : usage["runs"])
    if (run["run"] == job_id) job_cost = run["total"], job_idle = run["idle"];
  ASSERT_GT(job_cost, 0) << usage.dump();
  const double shown_cost = Dollars(shown["cost"]);
  EXPECT_GE(shown_cost, job_cost - job_idle - 1e-4) << usage.dump();
  EXPECT_LE(shown_cost, job_cost + 1e-4) << usage.dump();
  std::vector<std::string> checkpoints;
  for (const Json& cp : All(s, "/v1/fine_tuning/jobs/" + job_id + "/checkpoints"))
    checkpoints.push_back(cp["fine_tuned_model_checkpoint"]);
  EXPECT_EQ(shown["checkpoints"], Json(checkpoints));
  EXPECT_EQ(checkpoints.size(), 2u);
  // Each train step and each eval is a point; the base model's line runs
  // across every step.
  EXPECT_GE(shown["chart_points"].get<size_t>(), train_events.size() + evals.size());
  EXPECT_EQ(shown["chart_series"], 3);
  EXPECT_GT(shown["ink_train"].get<int>(), 200) << "the training curve is drawn";
  EXPECT_GT(shown["ink_valid"].get<int>(), 20) << "the validation points are drawn";
  EXPECT_GT(shown["ink_base"].get<int>(), 100) << "the base model's line is drawn";
  EXPECT_EQ(shown["log_lines"].get<size_t>(),
            All(s, "/v1/fine_tuning/jobs/" + job_id + "/logs", "seq").size());

  // The sweep: both runs, both curves, its cost.
  Json sw = s.Send("GET", "/v1/sweeps/" + sweep_id).body;
  ASSERT_EQ(sw["runs"].size(), 2u);
  EXPECT_EQ(o["sweep"]["runs"], Json({sw["runs"][0]["job_id"], sw["runs"][1]["job_id"]}));
  EXPECT_EQ(o["sweep"]["status"], sw["status"]);
  EXPECT_EQ(o["sweep"]["chart_series"], 2);
  EXPECT_EQ(o["sweep"]["chart_points"], 12) << "6 steps of each run";
  for (const Json& ink : o["sweep"]["ink"]) EXPECT_GT(ink.get<int>(), 50) << o["sweep"].dump();
  EXPECT_GT(Dollars(o["sweep"]["cost"]), 0);
  EXPECT_LE(Dollars(o["sweep"]["cost"]), sw["usage"]["cost"].get<double>() + 1e-4);

  // The pool chart has the workers; the cost page lists every run, and its
  // total lies between the job's cost and the total now (idle workers keep
  // billing until they scale down).
  EXPECT_GT(o["workers"]["chart_points"].get<int>(), 0);
  EXPECT_GT(o["workers"]["ink"].get<int>(), 50);
  const double shown_total = Dollars(o["cost"]["total"]);
  EXPECT_GE(shown_total + 1e-4, shown_cost);
  EXPECT_LE(shown_total, s.Send("GET", "/v1/usage").body["total_cost"].get<double>() + 1e-4);
  for (const std::string& id :
       {job_id, sw["runs"][0]["job_id"].get<std::string>(), sw["runs"][1]["job_id"].get<std::string>()}) {
    EXPECT_NE(std::find(o["cost"]["runs"].begin(), o["cost"]["runs"].end(), Json(id)),
              o["cost"]["runs"].end())
        << id;
  }
  EXPECT_GT(o["cost"]["ink"].get<int>(), 20) << "the day's bar is drawn";
  for (const char* page :
       {"sign-in", "jobs", "job-running", "job", "sweep", "workers", "cost", "deployments", "loops"}) {
    EXPECT_TRUE(fs::exists(shots / (std::string(page) + ".png"))) << page;
  }
}

}  // namespace
}  // namespace burst::e2e
