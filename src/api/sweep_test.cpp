// Sweeps: grid expansion, the mapping of sweep fields onto a job body, error
// naming, and the table (status, metrics, best run).
#include <gtest/gtest.h>

#include "api/sweeps.h"
#include "core/ids.h"

namespace burst {
namespace {

Json Job() { return {{"model", "burst-small"}, {"training_file", "file-abc"}}; }

// The Status an ExpandSweep/PointJobBody call throws (ok when none).
template <typename Fn>
Status Thrown(Fn&& fn) {
  return Try([&] { fn(); });
}

TEST(SweepExpand, GridIsTheCartesianProductInAStableOrder) {
  Json body = {{"job", Job()},
               {"grid", {{"lora.rank", {4, 8}}, {"learning_rate_multiplier", {0.5, 1.0, 2.0}}}}};
  std::vector<SweepPoint> pts = ExpandSweep(body);
  ASSERT_EQ(pts.size(), 6u);
  // Fields sorted by name (learning_rate_multiplier < lora.rank), the first
  // varying slowest, values in the order given.
  const std::vector<std::pair<double, int>> want = {{0.5, 4}, {0.5, 8}, {1.0, 4},
                                                    {1.0, 8}, {2.0, 4}, {2.0, 8}};
  for (size_t i = 0; i < pts.size(); ++i) {
    EXPECT_EQ(pts[i].overrides["learning_rate_multiplier"].get<double>(), want[i].first) << i;
    EXPECT_EQ(pts[i].overrides["lora.rank"].get<int>(), want[i].second) << i;
  }
  EXPECT_EQ(pts[3].where.at("learning_rate_multiplier"), "grid.learning_rate_multiplier[1]");
  EXPECT_EQ(pts[3].where.at("lora.rank"), "grid.lora.rank[1]");
  EXPECT_EQ(OverridesText(pts[3].overrides), "learning_rate_multiplier=1.0 lora.rank=8");
  // The same body always gives the same points.
  std::vector<SweepPoint> again = ExpandSweep(body);
  for (size_t i = 0; i < pts.size(); ++i) EXPECT_EQ(pts[i].overrides, again[i].overrides);
}

TEST(SweepExpand, GridOfOneField) {
  std::vector<SweepPoint> pts = ExpandSweep({{"job", Job()}, {"grid", {{"seed", {1, 2, 3}}}}});
  ASSERT_EQ(pts.size(), 3u);
  EXPECT_EQ(pts[2].overrides, Json({{"seed", 3}}));
  EXPECT_EQ(pts[2].where.at("seed"), "grid.seed[2]");
}

TEST(SweepExpand, RunsAreTakenAsGiven) {
  Json body = {
      {"job", Job()},
      {"runs",
       Json::array({{{"lora.rank", 4}}, Json::object(), {{"recipe.lora.alpha", 8}, {"n_epochs", 2}}})}};
  std::vector<SweepPoint> pts = ExpandSweep(body);
  ASSERT_EQ(pts.size(), 3u);
  EXPECT_EQ(pts[0].overrides, Json({{"lora.rank", 4}}));
  EXPECT_TRUE(pts[1].overrides.empty());
  // "recipe." is dropped from the field, kept in the request path.
  EXPECT_EQ(pts[2].overrides, Json({{"lora.alpha", 8}, {"n_epochs", 2}}));
  EXPECT_EQ(pts[2].where.at("lora.alpha"), "runs[2].recipe.lora.alpha");
  EXPECT_EQ(pts[2].where.at("n_epochs"), "runs[2].n_epochs");
}

TEST(SweepExpand, AtMost256Points) {
  Json values = Json::array();
  for (int i = 0; i < 16; ++i) values.push_back(i);
  EXPECT_EQ(ExpandSweep({{"job", Job()}, {"grid", {{"seed", values}, {"lora.rank", values}}}}).size(), 256u);
  Json more = values;
  more.push_back(16);
  Status s = Thrown([&] {
    ExpandSweep({{"job", Job()}, {"grid", {{"seed", values}, {"lora.rank", more}}}});
  });
  EXPECT_EQ(s.code(), Code::kInvalidArgument);
  EXPECT_EQ(s.param(), "grid");
  EXPECT_NE(s.message().find("272 points"), std::string::npos) << s.message();

  Json runs = Json::array();
  for (int i = 0; i < 257; ++i) runs.push_back({{"seed", i}});
  s = Thrown([&] { ExpandSweep({{"job", Job()}, {"runs", runs}}); });
  EXPECT_EQ(s.param(), "runs");
  runs.erase(runs.size() - 1);
  EXPECT_EQ(ExpandSweep({{"job", Job()}, {"runs", runs}}).size(), 256u);
}

// The count a grid reports is its true size, even where the product of its
// fields' value counts does not fit in 64 bits (16^16 = 2^64).
TEST(SweepExpand, AHugeGridSaysHowBigItIs) {
  Json values = Json::array();
  for (int i = 0; i < 16; ++i) values.push_back(i);
  auto grid_of = [&](int fields) {
    Json grid = Json::object();
    for (int f = 0; f < fields; ++f) grid["lora.f" + std::to_string(f)] = values;
    return Json{{"job", Job()}, {"grid", grid}};
  };
  Status s = Thrown([&] { ExpandSweep(grid_of(15)); });  // 2^60: fits
  EXPECT_EQ(s.param(), "grid");
  EXPECT_NE(s.message().find("has 1152921504606846976 points"), std::string::npos) << s.message();
  for (int fields : {16, 17, 40}) {
    s = Thrown([&] { ExpandSweep(grid_of(fields)); });
    EXPECT_EQ(s.code(), Code::kInvalidArgument) << fields;
    EXPECT_EQ(s.param(), "grid") << fields;
    EXPECT_NE(s.message().find("has more than 18446744073709551615 points"), std::string::npos)
        << fields << ": " << s.message();
    EXPECT_EQ(s.message().find('-'), std::string::npos) << fields << ": " << s.message();
  }
}

TEST(SweepExpand, BadShapesNameTheField) {
  auto param = [](const Json& body) {
    Status s = Thrown([&] { ExpandSweep(body); });
    EXPECT_EQ(s.code(), Code::kInvalidArgument) << body.dump();
    return s.param();
  };
  EXPECT_EQ(param({{"grid", {{"seed", {1}}}}}), "job");
  EXPECT_EQ(param({{"job", "x"}, {"grid", {{"seed", {1}}}}}), "job");
  EXPECT_EQ(param({{"job", Job()}}), "grid");
  EXPECT_EQ(param({{"job", Job()}, {"grid", {{"seed", {1}}}}, {"runs", {{{"seed", 1}}}}}), "runs");
  EXPECT_EQ(param({{"job", Job()}, {"grid", {{"seed", {1}}}}, {"extra", 1}}), "extra");
  EXPECT_EQ(param({{"job", Job()}, {"grid", Json::object()}}), "grid");
  EXPECT_EQ(param({{"job", Job()}, {"grid", {{"seed", 1}}}}), "grid.seed");
  EXPECT_EQ(param({{"job", Job()}, {"grid", {{"seed", Json::array()}}}}), "grid.seed");
  EXPECT_EQ(param({{"job", Job()}, {"grid", {{"lora..rank", {1}}}}}), "grid.lora..rank");
  EXPECT_EQ(param({{"job", Job()}, {"grid", {{"lora rank", {1}}}}}), "grid.lora rank");
  EXPECT_EQ(param({{"job", Job()}, {"grid", {{"lora.rank", {1}}, {"recipe.lora.rank", {2}}}}}),
            "grid.recipe.lora.rank");
  EXPECT_EQ(param({{"job", Job()}, {"runs", Json::array()}}), "runs");
  EXPECT_EQ(param({{"job", Job()}, {"runs", {1}}}), "runs[0]");
  EXPECT_EQ(param({{"job", Job()}, {"runs", Json::array({{{"lora.rank", 1}, {"recipe.lora.rank", 2}}})}}),
            "runs[0].recipe.lora.rank");
}

SweepPoint Point(const Json& overrides) {
  SweepPoint p;
  p.overrides = overrides;
  for (auto it = overrides.begin(); it != overrides.end(); ++it) p.where[it.key()] = "runs[0]." + it.key();
  return p;
}

TEST(SweepMapping, OpenAINamesGoToTheMethodsHyperparameters) {
  Json body =
      PointJobBody(Job(), Point({{"n_epochs", 2}, {"batch_size", 8}, {"learning_rate_multiplier", 0.5}}));
  EXPECT_EQ(body["method"],
            Json({{"type", "supervised"},
                  {"supervised",
                   {{"hyperparameters",
                     {{"n_epochs", 2}, {"batch_size", 8}, {"learning_rate_multiplier", 0.5}}}}}}));
  EXPECT_FALSE(body.contains("recipe"));

  // DPO: into method.dpo, beside what the body already has.
  Json dpo = Job();
  dpo["method"] = {{"type", "dpo"}, {"dpo", {{"hyperparameters", {{"beta", 0.1}}}}}};
  body = PointJobBody(dpo, Point({{"beta", 0.2}, {"n_epochs", 1}}));
  EXPECT_EQ(body["method"]["dpo"]["hyperparameters"], Json({{"beta", 0.2}, {"n_epochs", 1}}));

  // The older top-level hyperparameters object, when the body uses it.
  Json legacy = Job();
  legacy["hyperparameters"] = {{"n_epochs", 3}};
  body = PointJobBody(legacy, Point({{"batch_size", 4}}));
  EXPECT_EQ(body["hyperparameters"], Json({{"n_epochs", 3}, {"batch_size", 4}}));
  EXPECT_FALSE(body.contains("method"));
}

TEST(SweepMapping, JobFieldsAtTheTopRecipePathsInTheRecipe) {
  Json job = Job();
  job["recipe"] = {{"lora", {{"alpha", 32}}}, {"max_steps", 4}};
  Json body = PointJobBody(job, Point({{"training_file", "file-x"},
                                       {"seed", 7},
                                       {"suffix", "s"},
                                       {"validation_file", "file-v"},
                                       {"lora.rank", 16},
                                       {"learning_rate", 1e-3},
                                       {"schedule.kind", "cosine"}}));
  EXPECT_EQ(body["training_file"], "file-x");
  EXPECT_EQ(body["validation_file"], "file-v");
  EXPECT_EQ(body["seed"], 7);
  EXPECT_EQ(body["suffix"], "s");
  EXPECT_EQ(body["recipe"], Json({{"lora", {{"alpha", 32}, {"rank", 16}}},
                                  {"max_steps", 4},
                                  {"learning_rate", 1e-3},
                                  {"schedule", {{"kind", "cosine"}}}}));
  // The base job is untouched.
  EXPECT_EQ(job["recipe"], Json({{"lora", {{"alpha", 32}}}, {"max_steps", 4}}));

  // A whole object first, then a field inside it.
  body = PointJobBody(Job(), Point({{"lora", {{"rank", 4}}}, {"lora.alpha", 8}}));
  EXPECT_EQ(body["recipe"]["lora"], Json({{"rank", 4}, {"alpha", 8}}));
}

TEST(SweepMapping, ABaseJobInTheWayIsNamed) {
  Json job = Job();
  job["recipe"] = {{"schedule", "cosine"}};
  Status s = Thrown([&] { PointJobBody(job, Point({{"schedule.warmup_steps", 2}})); });
  EXPECT_EQ(s.param(), "job.recipe.schedule");
  job["recipe"] = 3;
  EXPECT_EQ(Thrown([&] { PointJobBody(job, Point({{"lora.rank", 2}})); }).param(), "job.recipe");
  job = Job();
  job["method"] = "supervised";
  EXPECT_EQ(Thrown([&] { PointJobBody(job, Point({{"n_epochs", 2}})); }).param(), "job.method");
}

TEST(SweepErrors, AnErrorNamesTheValueThatCausedIt) {
  SweepPoint grid;
  grid.overrides = {{"lora.rank", 0}, {"n_epochs", 2}, {"seed", 1}};
  grid.where = {
      {"lora.rank", "grid.lora.rank[2]"}, {"n_epochs", "grid.n_epochs[0]"}, {"seed", "grid.seed[1]"}};
  auto at = [&](const std::string& param) {
    return SweepPointError(Status(Code::kInvalidArgument, param + ": bad", param), grid, 5).param();
  };
  EXPECT_EQ(at("recipe.lora.rank"), "grid.lora.rank[2]");
  EXPECT_EQ(at("method.supervised.hyperparameters.n_epochs"), "grid.n_epochs[0]");
  EXPECT_EQ(at("hyperparameters.n_epochs"), "grid.n_epochs[0]");
  EXPECT_EQ(at("recipe.epochs"), "grid.n_epochs[0]");
  EXPECT_EQ(at("seed"), "grid.seed[1]");
  EXPECT_EQ(at("recipe.seed"), "grid.seed[1]");
  // Not an overridden field: the base job's.
  EXPECT_EQ(at("model"), "job.model");
  EXPECT_EQ(at("recipe.lora.alpha"), "job.recipe.lora.alpha");
  EXPECT_EQ(at("recipe.lora_rank"), "job.recipe.lora_rank");
  EXPECT_EQ(at(""), "job");

  Status s = SweepPointError(
      Status(Code::kInvalidArgument, "recipe: lora.rank: must be positive", "recipe.lora.rank"), grid, 5);
  EXPECT_EQ(s.code(), Code::kInvalidArgument);
  EXPECT_EQ(s.message(),
            "grid.lora.rank[2] (run 5: lora.rank=0 n_epochs=2 seed=1): recipe: lora.rank: must be positive");

  // The longest match wins: "lora" and "lora.rank" both cover recipe.lora.rank.
  SweepPoint runs;
  runs.overrides = {{"lora", {{"alpha", 1}}}, {"lora.rank", 0}};
  runs.where = {{"lora", "runs[2].lora"}, {"lora.rank", "runs[2].lora.rank"}};
  EXPECT_EQ(SweepPointError(Status(Code::kInvalidArgument, "x", "recipe.lora.rank"), runs, 2).param(),
            "runs[2].lora.rank");
  EXPECT_EQ(SweepPointError(Status(Code::kInvalidArgument, "x", "recipe.lora.targets[1]"), runs, 2).param(),
            "runs[2].lora");

  // Other errors pass through.
  Status internal(Code::kInternal, "disk", "");
  EXPECT_EQ(SweepPointError(internal, runs, 2).code(), Code::kInternal);
  EXPECT_EQ(SweepPointError(internal, runs, 2).message(), "disk");
}

// ----------------------------------------------------------------------------
// the table

SweepRunView JobRun(JobStatus status, const Json& result = Json(), bool valid = false) {
  SweepRunView v;
  v.job_id = "ftjob-" + std::string(ToString(status));
  v.job = JobRecord{};
  v.job->id = v.job_id;
  v.job->status = status;
  v.job->result = result;
  v.job->spec = {{"validation_file", valid ? Json("file-v") : Json()}};
  v.job->step = 4;
  v.job->total_steps = 4;
  return v;
}

Json Finished(double train, double eval, double acc) {
  return {{"train_loss", train},
          {"final", {{"eval_loss", eval}, {"eval_token_acc", acc}, {"eval_exact_match", nullptr}}}};
}

TEST(SweepTable, StatusFollowsTheJobs) {
  SweepRecord s;
  EXPECT_EQ(SweepStatus(s, {JobRun(JobStatus::kSucceeded), JobRun(JobStatus::kRunning)}),
            JobStatus::kRunning);
  EXPECT_EQ(SweepStatus(s, {JobRun(JobStatus::kQueued), JobRun(JobStatus::kFailed)}), JobStatus::kRunning);
  EXPECT_EQ(SweepStatus(s, {JobRun(JobStatus::kSucceeded), JobRun(JobStatus::kSucceeded)}),
            JobStatus::kSucceeded);
  EXPECT_EQ(SweepStatus(s, {JobRun(JobStatus::kSucceeded), JobRun(JobStatus::kFailed),
                            JobRun(JobStatus::kCancelled)}),
            JobStatus::kFailed);
  EXPECT_EQ(SweepStatus(s, {JobRun(JobStatus::kSucceeded), JobRun(JobStatus::kCancelled)}),
            JobStatus::kCancelled);
  // A job not created yet is pending, unless the sweep was cancelled.
  SweepRunView missing;
  missing.job_id = "ftjob-x";
  EXPECT_EQ(SweepStatus(s, {JobRun(JobStatus::kSucceeded), missing}), JobStatus::kRunning);
  s.cancelled_at = 1;
  EXPECT_EQ(SweepStatus(s, {JobRun(JobStatus::kSucceeded), missing}), JobStatus::kCancelled);
  EXPECT_EQ(SweepStatus(s, {JobRun(JobStatus::kFailed), JobRun(JobStatus::kCancelled)}),
            JobStatus::kCancelled);
}

TEST(SweepTable, BestRunByMetric) {
  SweepRecord s;
  s.id = "sweep-1";
  std::vector<SweepRunView> runs = {JobRun(JobStatus::kSucceeded, Finished(0.9, 1.5, 0.6), true),
                                    JobRun(JobStatus::kSucceeded, Finished(0.5, 1.7, 0.8), true),
                                    JobRun(JobStatus::kSucceeded, Finished(0.7, 1.2, 0.7), true),
                                    JobRun(JobStatus::kFailed, Json(), true)};
  runs[0].overrides = {{"lora.rank", 4}};
  runs[0].usage = {"", std::nullopt, 2.0, 0.25, 0, std::nullopt, "cpu", 2.0};
  runs[1].usage = {"", std::nullopt, 3.0, 0.5, 0, std::nullopt, "cpu", 3.0};
  runs[0].attempts = {AttemptRecord{"ftjob-a", 1, "wrk", 1000, 3500, AttemptOutcome::kCompleted, Json(), 0}};
  Json j = SweepJson(s, runs, "", 10'000);
  EXPECT_EQ(j["object"], "sweep");
  EXPECT_EQ(j["status"], "failed");
  EXPECT_EQ(j["metric"], "eval_loss");  // every run has a validation file
  EXPECT_EQ(j["metric_goal"], "min");
  EXPECT_EQ(j["best"]["index"], 2);
  EXPECT_EQ(j["best"]["value"], 1.2);
  EXPECT_EQ(j["counts"], Json({{"succeeded", 3}, {"failed", 1}}));
  ASSERT_EQ(j["runs"].size(), 4u);
  const Json& r0 = j["runs"][0];
  EXPECT_EQ(r0["overrides"], Json({{"lora.rank", 4}}));
  EXPECT_EQ(r0["metrics"]["train_loss"], 0.9);
  EXPECT_EQ(r0["metrics"]["eval_loss"], 1.5);
  EXPECT_EQ(r0["metrics"]["eval_token_acc"], 0.6);
  EXPECT_TRUE(r0["metrics"]["eval_exact_match"].is_null());
  EXPECT_EQ(r0["wall_s"], 2.5);
  EXPECT_EQ(r0["usage"]["cost"], 0.25);
  EXPECT_EQ(j["usage"]["seconds"], 5.0);
  EXPECT_EQ(j["usage"]["cost"], 0.75);
  EXPECT_EQ(j["wall_s"], 2.5);
  EXPECT_TRUE(j["runs"][3]["metrics"]["train_loss"].is_null());

  j = SweepJson(s, runs, "train_loss", 0);
  EXPECT_EQ(j["best"]["index"], 1);
  j = SweepJson(s, runs, "eval_token_acc", 0);  // higher is better
  EXPECT_EQ(j["metric_goal"], "max");
  EXPECT_EQ(j["best"]["index"], 1);
  EXPECT_EQ(j["best"]["value"], 0.8);
  j = SweepJson(s, runs, "cost", 0);  // runs without usage cost 0
  EXPECT_EQ(j["best"]["index"], 2);
  j = SweepJson(s, runs, "eval_exact_match", 0);  // no run has it
  EXPECT_TRUE(j["best"].is_null());

  EXPECT_EQ(Thrown([&] { SweepJson(s, runs, "accuracy", 0); }).param(), "metric");
}

TEST(SweepTable, TrainLossByDefaultWithoutValidationFiles) {
  SweepRecord s;
  std::vector<SweepRunView> runs = {JobRun(JobStatus::kSucceeded, Finished(0.9, 1.5, 0.6), true),
                                    JobRun(JobStatus::kSucceeded, Finished(0.5, 1.7, 0.8), false)};
  Json j = SweepJson(s, runs, "", 0);
  EXPECT_EQ(j["metric"], "train_loss");
  EXPECT_EQ(j["best"]["index"], 1);
  // Ties: the first run.
  runs[1].job->result = Finished(0.9, 1.0, 0.0);
  EXPECT_EQ(SweepJson(s, runs, "", 0)["best"]["index"], 0);
}

TEST(SweepTable, RunningRunsAreTimedToNow) {
  SweepRecord s;
  std::vector<SweepRunView> runs = {JobRun(JobStatus::kRunning)};
  runs[0].attempts = {AttemptRecord{"ftjob-a", 1, "wrk", 1000, 0, std::nullopt, Json(), 0}};
  Json j = SweepJson(s, runs, "", 4000);
  EXPECT_EQ(j["status"], "running");
  EXPECT_EQ(j["runs"][0]["wall_s"], 3.0);
  EXPECT_EQ(j["wall_s"], 3.0);
  EXPECT_TRUE(j["best"].is_null());
  EXPECT_TRUE(j["finished_at"].is_null());
  // A queued run has no wall time yet.
  EXPECT_TRUE(SweepJson(s, {JobRun(JobStatus::kQueued)}, "", 4000)["runs"][0]["wall_s"].is_null());
}

// ----------------------------------------------------------------------------
// the records

TEST(SweepRecords, CreateIsIdempotentListPagesCancelOnce) {
  auto md = Metadata::Open(":memory:");
  ASSERT_TRUE(md.ok()) << md.status().ToString();
  Metadata& m = *md.value();
  const std::string org = m.CreateOrg("a").value().id, other = m.CreateOrg("b").value().id;
  auto make = [&](const std::string& key, const std::string& sha) {
    SweepRecord s;
    s.id = NewId("sweep");
    s.org_id = org;
    s.idempotency_key = key;
    s.request_sha256 = sha;
    s.request = {{"job", Job()}, {"grid", {{"seed", {1, 2}}}}};
    s.runs = {{{"job_id", "ftjob-1"}, {"overrides", {{"seed", 1}}}},
              {{"job_id", "ftjob-2"}, {"overrides", {{"seed", 2}}}}};
    return s;
  };
  bool created = false;
  auto first = m.CreateSweep(make("k", "h1"), &created);
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  EXPECT_TRUE(created);
  EXPECT_GT(first.value().created_at, 0);
  // Same key, same body: the same sweep; another body: 409.
  auto again = m.CreateSweep(make("k", "h1"), &created);
  ASSERT_TRUE(again.ok());
  EXPECT_FALSE(created);
  EXPECT_EQ(again.value().id, first.value().id);
  EXPECT_EQ(again.value().runs, first.value().runs);
  auto clash = m.CreateSweep(make("k", "h2"), &created);
  EXPECT_EQ(clash.status().code(), Code::kAlreadyExists);
  EXPECT_EQ(clash.status().param(), "idempotency_key");
  // No key: always new.
  std::vector<std::string> ids = {first.value().id};
  for (int i = 0; i < 3; ++i) ids.push_back(m.CreateSweep(make("", "h1"), &created).value().id);

  auto page = m.ListSweeps(org, "", 2).value();
  ASSERT_EQ(page.size(), 2u);
  EXPECT_EQ(page[0].id, ids[3]);
  EXPECT_EQ(page[1].id, ids[2]);
  auto rest = m.ListSweeps(org, page[1].id, 10).value();
  ASSERT_EQ(rest.size(), 2u);
  EXPECT_EQ(rest[1].id, ids[0]);
  EXPECT_EQ(rest[1].request, make("", "").request);
  EXPECT_TRUE(m.ListSweeps(other, "", 10).value().empty());

  // Another organisation's sweep is not found.
  EXPECT_EQ(m.GetSweep(other, ids[0]).status().code(), Code::kNotFound);
  EXPECT_EQ(m.CancelSweep(other, ids[0], 5).status().code(), Code::kNotFound);
  EXPECT_TRUE(m.CancelSweep(org, ids[0], 5).value());
  EXPECT_FALSE(m.CancelSweep(org, ids[0], 6).value());
  EXPECT_EQ(m.GetSweep(org, ids[0]).value().cancelled_at, 5);
  EXPECT_EQ(m.GetSweep(org, ids[1]).value().cancelled_at, 0);
}

}  // namespace
}  // namespace burst
