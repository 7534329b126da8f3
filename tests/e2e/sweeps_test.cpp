// End-to-end tests of sweeps: a real `burst serve` with 2 slots of 1 thread
// (its workers are real `burst worker` processes), spoken to over HTTP and
// through `burst sweep`. One server serves the whole suite; each sweep is a
// few tiny jobs (max_steps 4), so the suite takes well under 2 minutes.
#include <gtest/gtest.h>
#include <httplib.h>

#include <memory>
#include <regex>

#include "e2e_http.h"

namespace burst::e2e {
namespace {

bool Terminal(const std::string& s) { return s == "succeeded" || s == "failed" || s == "cancelled"; }

class SweepsTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    server_ = new ServeProcess("burst-e2e-sweeps",
                               {"--slots", "2", "--threads-per-slot", "1", "--scaledown-window", "30"});
    if (!server_->error().empty()) {
      start_error_ = server_->error();
      return;
    }
    dir_ = &server_->dir();
    WriteHead(SupportValid(), *dir_ / "train.jsonl", 24);
    WriteHead(SupportValid(), *dir_ / "valid.jsonl", 8);
    train_ = Upload(*dir_ / "train.jsonl");
    valid_ = Upload(*dir_ / "valid.jsonl");
    // Two warm workers (a sweep starts one per slot), so that the tests'
    // sweeps find both slots free and idle: then their runs overlap however
    // slowly a loaded machine starts processes.
    Resp warm =
        Send("POST", "/v1/sweeps", {{"job", TinyJob(false)}, {"runs", {Json::object(), Json::object()}}});
    if (warm.status != 200) {
      start_error_ = "warm-up sweep: " + warm.Describe();
      return;
    }
    WaitSweep(warm.body["id"]);
    const bool idle = WaitUntil(
        [&] {
          Resp w = Send("GET", "/v1/workers");
          int n = 0;
          if (w.status == 200)
            for (const Json& x : w.body["data"]) n += x.value("state", "") == "idle";
          return n == 2;
        },
        60);
    if (!idle) start_error_ = "no 2 idle workers after the warm-up: " + Send("GET", "/v1/workers").raw;
  }
  static void TearDownTestSuite() {
    delete server_;  // SIGTERM, reaped
    server_ = nullptr;
    dir_ = nullptr;
  }
  void SetUp() override { ASSERT_TRUE(start_error_.empty()) << start_error_; }

  static Resp Send(const std::string& method, const std::string& path, const Json& body = Json(),
                   httplib::Headers headers = {}) {
    return server_->Send(method, path, body, std::move(headers));
  }
  static Json GetOk(const std::string& path) {
    Resp r = Send("GET", path);
    EXPECT_EQ(r.status, 200) << path << ": " << r.Describe();
    return r.body;
  }
  static std::string Upload(const fs::path& file) { return server_->Upload(file); }

  // A tiny job: 4 steps of 4 sequences.
  static Json TinyJob(bool with_valid) {
    Json job = {
        {"model", "burst-small"},
        {"training_file", train_},
        {"recipe", {{"max_steps", 4}, {"batch_size", 4}, {"max_seq_len", 128}, {"checkpoint_every", 4}}}};
    if (with_valid) job["validation_file"] = valid_;
    return job;
  }

  // Waits until the sweep has ended; the last sweep object seen.
  static Json WaitSweep(const std::string& id, double timeout_s = 120) {
    Json s;
    const bool done = WaitUntil(
        [&] {
          Resp r = Send("GET", "/v1/sweeps/" + id);
          if (r.status == 200) s = r.body;
          return s.is_object() && Terminal(s.value("status", ""));
        },
        timeout_s);
    EXPECT_TRUE(done) << "sweep " << id << " not over after " << timeout_s << " s: " << s.dump(1)
                      << "\n--- burst serve ---\n"
                      << server_->Output();
    return s;
  }

  static size_t Count(const std::string& list_path) {
    Json page = GetOk(list_path + "?limit=10000");
    return page.is_object() ? page["data"].size() : 0;
  }

  ProcResult Burst(std::vector<std::string> args, double timeout_s = 180) {
    return server_->Burst(args, timeout_s);
  }

  static const TempDir* dir_;
  static ServeProcess* server_;
  static std::string start_error_, train_, valid_;
};

const TempDir* SweepsTest::dir_ = nullptr;
ServeProcess* SweepsTest::server_ = nullptr;
std::string SweepsTest::start_error_, SweepsTest::train_, SweepsTest::valid_;

TEST_F(SweepsTest, GridRunsConcurrentlyTableAndBestRun) {
  ASSERT_FALSE(train_.empty() || valid_.empty());
  Json body = {{"job", TinyJob(true)}, {"grid", {{"seed", {3}}, {"lora.rank", {4, 8}}}}};
  Resp r = Send("POST", "/v1/sweeps", body);
  ASSERT_EQ(r.status, 200) << r.Describe();
  const Json created = r.body;
  EXPECT_EQ(created["object"], "sweep");
  EXPECT_TRUE(created["id"].get<std::string>().rfind("sweep-", 0) == 0) << created.dump();
  ASSERT_EQ(created["runs"].size(), 2u);
  // Fields sorted by name: lora.rank before seed; values in order.
  EXPECT_EQ(created["runs"][0]["overrides"], Json({{"lora.rank", 4}, {"seed", 3}}));
  EXPECT_EQ(created["runs"][1]["overrides"], Json({{"lora.rank", 8}, {"seed", 3}}));
  EXPECT_EQ(created["request"], body);
  const std::string id = created["id"];

  const Json s = WaitSweep(id);
  ASSERT_EQ(s.value("status", ""), "succeeded") << s.dump(1);
  EXPECT_EQ(s["metric"], "eval_loss");  // every run has a validation file
  EXPECT_EQ(s["counts"], Json({{"succeeded", 2}}));
  EXPECT_TRUE(s["finished_at"].is_number());
  EXPECT_GT(s["usage"]["cost"].get<double>(), 0);
  std::vector<double> eval, train;
  std::vector<std::pair<int64_t, int64_t>> spans;  // each job's attempt, unix ms
  for (size_t i = 0; i < 2; ++i) {
    const Json& run = s["runs"][i];
    EXPECT_EQ(run["status"], "succeeded");
    EXPECT_EQ(run["step"], 4);
    ASSERT_TRUE(run["metrics"]["train_loss"].is_number()) << run.dump();
    ASSERT_TRUE(run["metrics"]["eval_loss"].is_number()) << run.dump();
    EXPECT_TRUE(run["metrics"]["eval_token_acc"].is_number()) << run.dump();
    EXPECT_GT(run["wall_s"].get<double>(), 0);
    EXPECT_TRUE(run["usage"]["cost"].is_number());
    eval.push_back(run["metrics"]["eval_loss"]);
    train.push_back(run["metrics"]["train_loss"]);
    // Each run is an ordinary job carrying its sweep and its overrides.
    Json job = GetOk("/v1/fine_tuning/jobs/" + run["job_id"].get<std::string>());
    EXPECT_EQ(job["sweep_id"], id);
    EXPECT_EQ(job["recipe"]["lora"]["rank"], i == 0 ? 4 : 8);
    EXPECT_EQ(job["seed"], 3);
    EXPECT_EQ(job["recipe"]["max_steps"], 4);
    EXPECT_EQ(run["fine_tuned_model"], job["fine_tuned_model"]);
    ASSERT_EQ(job["attempts"].size(), 1u);
    spans.emplace_back(static_cast<int64_t>(job["attempts"][0]["started_at"].get<double>() * 1000),
                       static_cast<int64_t>(job["attempts"][0]["ended_at"].get<double>() * 1000));
  }
  // Two free slots: the runs overlapped rather than queued one behind the other.
  EXPECT_LT(std::max(spans[0].first, spans[1].first), std::min(spans[0].second, spans[1].second))
      << "attempts did not overlap: " << spans[0].first << "-" << spans[0].second << ", " << spans[1].first
      << "-" << spans[1].second;

  // The best run by each metric: lowest loss, highest accuracy.
  const size_t best_eval = eval[1] < eval[0] ? 1 : 0;
  EXPECT_EQ(s["best"]["index"], best_eval);
  EXPECT_EQ(s["best"]["job_id"], s["runs"][best_eval]["job_id"]);
  EXPECT_EQ(s["best"]["value"], eval[best_eval]);
  Json by_train = GetOk("/v1/sweeps/" + id + "?metric=train_loss");
  EXPECT_EQ(by_train["metric"], "train_loss");
  EXPECT_EQ(by_train["best"]["index"], train[1] < train[0] ? 1 : 0);
  Json by_acc = GetOk("/v1/sweeps/" + id + "?metric=eval_token_acc");
  EXPECT_EQ(by_acc["metric_goal"], "max");
  Resp bad = Send("GET", "/v1/sweeps/" + id + "?metric=accuracy");
  EXPECT_EQ(bad.status, 400) << bad.Describe();
  EXPECT_EQ(bad.body["error"]["param"], "metric") << bad.Describe();

  // Listed, newest first, paged like jobs.
  Json list = GetOk("/v1/sweeps?limit=1");
  ASSERT_EQ(list["data"].size(), 1u);
  EXPECT_EQ(list["data"][0]["id"], id);
  Resp missing = Send("GET", "/v1/sweeps/sweep-nope");
  EXPECT_EQ(missing.status, 404);
  EXPECT_EQ(missing.body["error"]["code"], "not_found");
  // An ended sweep cannot be cancelled.
  Resp late = Send("POST", "/v1/sweeps/" + id + "/cancel", Json::object());
  EXPECT_EQ(late.status, 409) << late.Describe();
}

TEST_F(SweepsTest, ABadPointCreatesNothing) {
  const size_t jobs = Count("/v1/fine_tuning/jobs"), sweeps = Count("/v1/sweeps");
  auto expect_400 = [&](const Json& body, const std::string& param) {
    Resp r = Send("POST", "/v1/sweeps", body);
    EXPECT_EQ(r.status, 400) << r.Describe();
    EXPECT_EQ(r.body["error"]["code"], "invalid_argument") << r.Describe();
    EXPECT_EQ(r.body["error"]["param"], param) << r.Describe();
  };
  // The third value of lora.rank is bad; the first two are fine.
  expect_400({{"job", TinyJob(false)}, {"grid", {{"lora.rank", {4, 8, 0}}}}}, "grid.lora.rank[2]");
  expect_400(
      {{"job", TinyJob(false)}, {"runs", {{{"lora.rank", 4}}, {{"n_epochs", 1}}, {{"lora.rank", "x"}}}}},
      "runs[2].lora.rank");
  expect_400({{"job", TinyJob(false)}, {"runs", {{{"seed", 1}}, {{"learning_rate_multiplier", -1}}}}},
             "runs[1].learning_rate_multiplier");
  expect_400({{"job", TinyJob(false)}, {"runs", {{{"training_file", "file-nope"}}}}},
             "runs[0].training_file");
  Json bad_job = TinyJob(false);
  bad_job["model"] = "no-such-model";
  expect_400({{"job", bad_job}, {"grid", {{"seed", {1, 2}}}}}, "job.model");
  Json many = Json::array();
  for (int i = 0; i < 17; ++i) many.push_back(i);
  expect_400({{"job", TinyJob(false)}, {"grid", {{"seed", many}, {"lora.alpha", many}}}}, "grid");
  expect_400({{"job", TinyJob(false)}}, "grid");
  EXPECT_EQ(Count("/v1/fine_tuning/jobs"), jobs);
  EXPECT_EQ(Count("/v1/sweeps"), sweeps);
}

TEST_F(SweepsTest, IdempotencyKeyAndCancel) {
  // Long runs, so that the cancel finds them queued or running.
  Json job = TinyJob(false);
  job["recipe"].erase("max_steps");
  job["recipe"]["epochs"] = 1000;
  Json body = {{"job", job}, {"runs", {{{"seed", 1}}, {{"seed", 2}}, {{"seed", 3}}}}};
  const size_t jobs = Count("/v1/fine_tuning/jobs");
  Resp a = Send("POST", "/v1/sweeps", body, {{"Idempotency-Key", "sweep-key-1"}});
  ASSERT_EQ(a.status, 200) << a.Describe();
  const std::string id = a.body["id"];
  Resp b = Send("POST", "/v1/sweeps", body, {{"Idempotency-Key", "sweep-key-1"}});
  ASSERT_EQ(b.status, 200) << b.Describe();
  EXPECT_EQ(b.body["id"], id);
  EXPECT_EQ(Count("/v1/fine_tuning/jobs"), jobs + 3);  // not 6
  Json other = body;
  other["runs"][0]["seed"] = 9;
  Resp c = Send("POST", "/v1/sweeps", other, {{"Idempotency-Key", "sweep-key-1"}});
  EXPECT_EQ(c.status, 409) << c.Describe();

  // Two run, the third waits for a slot.
  EXPECT_TRUE(WaitUntil(
      [&] {
        Json s = GetOk("/v1/sweeps/" + id);
        return s.is_object() && s["counts"].value("running", 0) == 2;
      },
      60))
      << GetOk("/v1/sweeps/" + id).dump(1);
  Resp cancel = Send("POST", "/v1/sweeps/" + id + "/cancel", Json::object());
  ASSERT_EQ(cancel.status, 200) << cancel.Describe();
  EXPECT_EQ(cancel.body["status"], "cancelled");
  EXPECT_TRUE(cancel.body["cancelled_at"].is_number());
  for (const Json& run : cancel.body["runs"]) EXPECT_EQ(run["status"], "cancelled") << run.dump();
  Resp again = Send("POST", "/v1/sweeps/" + id + "/cancel", Json::object());
  EXPECT_EQ(again.status, 409) << again.Describe();
  // The same request again creates nothing more.
  Resp d = Send("POST", "/v1/sweeps", body, {{"Idempotency-Key", "sweep-key-1"}});
  EXPECT_EQ(d.status, 200) << d.Describe();
  EXPECT_EQ(d.body["status"], "cancelled");
  EXPECT_EQ(Count("/v1/fine_tuning/jobs"), jobs + 3);
  // The workers let go of the cancelled tasks within seconds.
  EXPECT_TRUE(WaitUntil(
      [&] {
        Json w = GetOk("/v1/workers");
        for (const Json& x : w["data"])
          if (x["job"].is_string()) return false;
        return true;
      },
      30))
      << GetOk("/v1/workers").dump(1);
}

TEST_F(SweepsTest, CliCreateWaitGetList) {
  WriteJsonFile(*dir_ / "recipe.json", {{"max_steps", 4}, {"batch_size", 4}, {"max_seq_len", 128}});
  ProcResult run =
      Burst({"sweep", "create", "--model", "burst-small", "--training-file", (*dir_ / "train.jsonl").string(),
             "--recipe", (*dir_ / "recipe.json").string(), "--grid", "lora.rank=4,8", "--wait", "--json"});
  ASSERT_TRUE(run.ok()) << run.Describe();
  Json s = Json::parse(run.out, nullptr, false);
  ASSERT_TRUE(s.is_object()) << run.out;
  EXPECT_EQ(s["status"], "succeeded");
  EXPECT_EQ(s["metric"], "train_loss");  // no validation file
  ASSERT_EQ(s["runs"].size(), 2u);
  EXPECT_EQ(s["runs"][1]["overrides"], Json({{"lora.rank", 8}}));
  EXPECT_TRUE(s["best"].is_object());
  EXPECT_TRUE(Contains(run.err, "uploaded ")) << run.err;  // progress goes to stderr with --json
  const std::string id = s["id"];

  ProcResult get = Burst({"sweep", "get", id});
  ASSERT_TRUE(get.ok()) << get.Describe();
  EXPECT_TRUE(Contains(get.out, "sweep " + id + "  succeeded  2 runs")) << get.out;
  for (const Json& r : s["runs"]) EXPECT_TRUE(Contains(get.out, r["job_id"].get<std::string>())) << get.out;
  EXPECT_TRUE(std::regex_search(get.out, std::regex("lora\\.rank=8 +succeeded +4/4 "))) << get.out;
  EXPECT_TRUE(Contains(get.out, "best by train_loss (lower is better): #" + s["best"]["index"].dump()))
      << get.out;

  ProcResult list = Burst({"sweep", "list"});
  ASSERT_TRUE(list.ok()) << list.Describe();
  EXPECT_TRUE(std::regex_search(list.out, std::regex(id + " +succeeded +2 "))) << list.out;

  ProcResult cancel = Burst({"sweep", "cancel", id});
  EXPECT_FALSE(cancel.ok());
  EXPECT_TRUE(Contains(cancel.err, "has already succeeded")) << cancel.Describe();
}

// An organisation's cap on active jobs holds for a sweep as a whole.
TEST_F(SweepsTest, OrgCapRefusesAWholeSweep) {
  ServeProcess server("burst-e2e-sweeps-cap",
                      {"--slots", "1", "--threads-per-slot", "1", "--org-max-jobs", "2"});
  ASSERT_TRUE(server.error().empty()) << server.error();
  const std::string file = server.Upload(*dir_ / "train.jsonl");
  ASSERT_FALSE(file.empty());
  Json job = TinyJob(false);
  job["training_file"] = file;
  job["recipe"].erase("max_steps");
  job["recipe"]["epochs"] = 1000;  // they stay active
  auto post = [&](const Json& body, httplib::Headers h) {
    Resp r = server.Send("POST", "/v1/sweeps", body, std::move(h));
    return std::make_pair(r.status, r.body);
  };
  auto count = [&](const std::string& path) {
    Resp r = server.Send("GET", path + "?limit=10000");
    return r.status == 200 ? r.body["data"].size() : size_t{999};
  };
  auto [status, body] = post({{"job", job}, {"grid", {{"seed", {1, 2, 3}}}}}, {});
  EXPECT_EQ(status, 429) << body.dump();
  EXPECT_EQ(body["error"]["code"], "org_cap") << body.dump();
  EXPECT_EQ(body["error"]["param"], "max_active_jobs") << body.dump();
  EXPECT_EQ(count("/v1/fine_tuning/jobs"), 0u);
  EXPECT_EQ(count("/v1/sweeps"), 0u);
  // Two fit; their replay is no new sweep, even at the cap.
  const Json two = {{"job", job}, {"grid", {{"seed", {1, 2}}}}};
  auto [s1, b1] = post(two, {{"Idempotency-Key", "cap-1"}});
  ASSERT_EQ(s1, 200) << b1.dump();
  auto [s2, b2] = post(two, {{"Idempotency-Key", "cap-1"}});
  EXPECT_EQ(s2, 200) << b2.dump();
  EXPECT_EQ(b2["id"], b1["id"]);
  EXPECT_EQ(count("/v1/fine_tuning/jobs"), 2u);
  EXPECT_EQ(
      server.Send("POST", "/v1/sweeps/" + b1["id"].get<std::string>() + "/cancel", Json::object()).status,
      200);
}

}  // namespace
}  // namespace burst::e2e
