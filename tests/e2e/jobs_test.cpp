// End-to-end tests of fine-tuning jobs: scaling from zero and back, warm
// reuse, queueing and fairness, cancel, bad requests, pinned sampling,
// evaluation, capacity against quota and the usage ledger. The fixture is
// in jobs_fixture.h; the fault tests in jobs_faults_test.cpp.
#include "jobs_fixture.h"

namespace burst::e2e::jobs {
namespace {

// The executor, local or Slurm (e2e_slurm.h), for the whole binary.
const ::testing::Environment* const kExecutor = ::testing::AddGlobalTestEnvironment(new E2eExecutor);

// 1. An idle Burst has no workers; a job starts one, succeeds with its
// checkpoints in the store and in the API, and the pool empties again.
TEST_F(JobsTest, ScalesFromZeroAndBack) {
  Server& s = Shared();
  ASSERT_TRUE(WaitUntil([&] { return s.PoolEmpty(); }, kScaledownS + 30)) << s.Workers().dump();
  EXPECT_TRUE(s.Workers()["data"].empty());

  const std::string id = s.Submit(Spec(TrainFile(), 6));
  if (E2eExecutor::OnSlurm()) {
    // Its worker is a Slurm job: in Slurm's queue while the job runs.
    std::string queue;
    WaitUntil(
        [&] {
          queue = LiveSlurmJobs();
          return Contains(queue, "burst-wrk-") || Terminal(s.Job(id).value("status", ""));
        },
        60);
    EXPECT_TRUE(Contains(queue, "burst-wrk-")) << "no worker in Slurm's queue: " << queue;
  }
  Json job = s.WaitJob(id);
  ASSERT_EQ(job["status"], "succeeded") << s.Diagnose(id);
  ASSERT_EQ(job["attempts"].size(), 1u) << s.Diagnose(id);
  const Json& a = job["attempts"][0];
  EXPECT_EQ(a["outcome"], "completed");
  EXPECT_EQ(a["resumed_from_step"], 0);
  EXPECT_EQ(a["worker"].get<std::string>().rfind("wrk-", 0), 0u) << a.dump();
  EXPECT_EQ(job["fine_tuned_model"], id + ":step-6");
  EXPECT_EQ(job["step"], 6);
  EXPECT_EQ(job["total_steps"], 6);
  EXPECT_TRUE(job["trained_tokens"].is_number_integer() && job["trained_tokens"].get<int64_t>() > 0)
      << job.dump();
  EXPECT_TRUE(job["started_at"].is_number() && job["finished_at"].is_number()) << job.dump();
  EXPECT_TRUE(job["error"].is_null());
  EXPECT_GT(job["usage"]["seconds"].get<double>(), 0.0) << job.dump();

  // The checkpoints, committed in the store (manifests match their files)...
  const fs::path dir = JobStoreDir(s, job);
  EXPECT_EQ(CheckpointSteps(dir), (std::vector<int64_t>{2, 4, 6})) << dir;
  for (int64_t step : {2, 4, 6}) {
    EXPECT_TRUE(ManifestMatches(StepDir(dir, step) / "sampler", "peft-lora"));
    EXPECT_TRUE(ManifestMatches(StepDir(dir, step) / "state", "burst-state"));
  }
  EXPECT_TRUE(fs::is_regular_file(dir / "metrics.jsonl"));
  // ...and in the API, newest first.
  Json cps = s.GetOk("/v1/fine_tuning/jobs/" + id + "/checkpoints")["data"];
  ASSERT_EQ(cps.size(), 3u) << cps.dump();
  for (size_t i = 0; i < 3; ++i) {
    const int64_t step = 6 - 2 * static_cast<int64_t>(i);
    EXPECT_EQ(cps[i]["object"], "fine_tuning.job.checkpoint");
    EXPECT_EQ(cps[i]["step_number"], step);
    EXPECT_EQ(cps[i]["fine_tuned_model_checkpoint"], id + ":step-" + std::to_string(step));
    EXPECT_EQ(cps[i]["fine_tuning_job_id"], id);
    EXPECT_EQ(cps[i]["kinds"], Json::array({"sampler", "state"}));
  }

  // Events: metrics for every step, and the story of the job.
  Json events = s.Events(id);
  std::set<int64_t> steps;
  for (const Json& e : events) {
    EXPECT_EQ(e["object"], "fine_tuning.job.event");
    if (e["type"] == "metrics") {
      ASSERT_TRUE(e["data"].is_object() && e["data"]["step"].is_number_integer()) << e.dump();
      steps.insert(e["data"]["step"].get<int64_t>());
    }
  }
  EXPECT_EQ(steps, (std::set<int64_t>{1, 2, 3, 4, 5, 6})) << s.Diagnose(id);
  EXPECT_TRUE(AnyMessage(events, "Starting worker")) << s.Diagnose(id);
  EXPECT_TRUE(AnyMessage(events, "successfully completed")) << s.Diagnose(id);
  // Newest first by default.
  Json desc = s.GetOk("/v1/fine_tuning/jobs/" + id + "/events?limit=1")["data"];
  ASSERT_EQ(desc.size(), 1u);
  EXPECT_EQ(desc[0]["id"], events.back()["id"]);

  // The worker's log lines, complete.
  Json logs = s.GetOk("/v1/fine_tuning/jobs/" + id + "/logs?limit=10000");
  EXPECT_FALSE(logs["data"].empty()) << logs.dump();
  EXPECT_EQ(logs["done"], true) << logs.dump();
  bool finished_line = false;
  for (const Json& l : logs["data"])
    finished_line = finished_line || Contains(l.value("text", ""), "training finished");
  EXPECT_TRUE(finished_line) << logs.dump();

  // After the scaledown window the pool is empty again.
  EXPECT_TRUE(WaitUntil([&] { return s.PoolEmpty(); }, kScaledownS + 20))
      << s.Workers().dump() << s.Diagnose(id);
  if (E2eExecutor::OnSlurm()) {
    EXPECT_TRUE(WaitUntil([] { return LiveSlurmJobs().empty(); }, 30))
        << "left in Slurm: " << LiveSlurmJobs();
  }
}

// 2. Back-to-back jobs on one slot: the second reuses the warm worker and
// does not load the base model again.
TEST_F(JobsTest, WarmWorkerRunsTheNextJobWithoutReloading) {
  Server& s = Shared();
  // Start cold, so that the first job must load the model.
  ASSERT_TRUE(WaitUntil([&] { return s.PoolEmpty(); }, kScaledownS + 30)) << s.Workers().dump();
  const std::string first = s.Submit(Spec(TrainFile(), 3));
  Json j1 = s.WaitJob(first);
  ASSERT_EQ(j1["status"], "succeeded") << s.Diagnose(first);
  const std::string second = s.Submit(Spec(TrainFile(), 3));
  Json j2 = s.WaitJob(second);
  ASSERT_EQ(j2["status"], "succeeded") << s.Diagnose(second);
  ASSERT_EQ(j1["attempts"].size(), 1u);
  ASSERT_EQ(j2["attempts"].size(), 1u) << s.Diagnose(second);
  EXPECT_EQ(j2["attempts"][0]["worker"], j1["attempts"][0]["worker"]) << s.Diagnose(second);

  Json e1 = s.Events(first), e2 = s.Events(second);
  EXPECT_TRUE(AnyMessage(e1, "loaded base model")) << s.Diagnose(first);
  EXPECT_FALSE(AnyMessage(e1, "already loaded")) << s.Diagnose(first);
  EXPECT_TRUE(AnyMessage(e2, "already loaded")) << s.Diagnose(second);
  EXPECT_FALSE(AnyMessage(e2, "loaded base model")) << s.Diagnose(second);
  EXPECT_FALSE(AnyMessage(e2, "Starting worker")) << s.Diagnose(second);
}

// 3. More jobs than slots wait in the queue and all succeed; with a second
// organisation, its one job is not stuck behind the first's four.
TEST_F(JobsTest, QueuesBeyondCapacityFairlyAndNeverFailsForIt) {
  Server& s = Shared();
  std::optional<OrgKey> b = OrgB();
  if (!b) {
    std::printf(
        "[note] this build has no `burst orgs create`: fairness between organisations is not checked, "
        "only queueing within one\n");
    RecordProperty("cross_org_fairness", "not checked: no `burst orgs create`");
  }
  std::vector<std::string> a_jobs;
  for (int i = 0; i < 4; ++i) {
    const std::string id = s.Submit(Spec(TrainFile(), 3, {{"checkpoint_every", 10}}));
    a_jobs.push_back(id);
  }
  std::string b_job;
  if (b) b_job = s.Submit(Spec(org_b_file_, 3, {{"checkpoint_every", 10}}), b->key);
  // Right after submission at most one runs; the rest wait, none failed.
  int waiting = 0;
  for (const auto& id : a_jobs) {
    Json j = s.Job(id);
    EXPECT_NE(j["status"], "failed") << j.dump();
    waiting += j["status"] == "queued";
  }
  EXPECT_GE(waiting, 2);
  EXPECT_GE(s.Workers().value("queued", 0), 2);

  // The pool is shared, its work is not: B sees A's workers only as busy,
  // with no job id, pid or model, and never A's job ids.
  if (b) {
    bool saw_other = false;
    WaitUntil(
        [&] {
          const Json pool = s.GetOk("/v1/workers", b->key);
          for (const Json& w : pool["data"]) {
            if (w["job"].is_string()) {
              EXPECT_EQ(w["job"], b_job) << "B sees " << pool.dump();
              continue;
            }
            if (w["state"] == "busy" && w["sampling"].is_null() && w["deployment"].is_null()) {
              EXPECT_TRUE(w["pid"].is_null() && w["model"].is_null()) << "B sees " << pool.dump();
              saw_other = true;
            }
          }
          for (const auto& id : a_jobs) EXPECT_FALSE(Contains(pool.dump(), id)) << "B sees " << pool.dump();
          return saw_other || Terminal(s.Job(a_jobs.back()).value("status", ""));
        },
        120, 20);
    EXPECT_TRUE(saw_other) << "B never saw A's busy worker";
  }
  std::vector<Json> a_done;
  for (const auto& id : a_jobs) {
    a_done.push_back(s.WaitJob(id));
    EXPECT_EQ(a_done.back()["status"], "succeeded") << s.Diagnose(id);
    EXPECT_EQ(Outcomes(a_done.back()), std::vector<std::string>{"completed"}) << s.Diagnose(id);
  }
  std::vector<Json> all = a_done;
  if (b) {
    Json jb = s.WaitJob(b_job, 180, b->key);
    EXPECT_EQ(jb["status"], "succeeded") << s.Diagnose(b_job, b->key);
    EXPECT_EQ(Outcomes(jb), std::vector<std::string>{"completed"}) << s.Diagnose(b_job, b->key);
    all.push_back(jb);
    // Round robin between organisations: B's job runs right after A's
    // first, not after all four.
    ASSERT_FALSE(jb["attempts"].empty());
    EXPECT_LT(jb["attempts"][0]["started_at"].get<double>(),
              a_done[1]["attempts"][0]["started_at"].get<double>())
        << "organisation B waited behind A's second job:\nA: " << a_done[1].dump() << "\nB: " << jb.dump();
    // Organisations see only their own jobs.
    Json b_list = s.GetOk("/v1/fine_tuning/jobs?limit=10000", b->key)["data"];
    ASSERT_EQ(b_list.size(), 1u) << b_list.dump();
    EXPECT_EQ(b_list[0]["id"], b_job);
    ExpectError(s.Get("/v1/fine_tuning/jobs/" + a_jobs[0], b->key), 404, "not_found");
    ExpectError(s.Get("/v1/fine_tuning/jobs/" + b_job), 404, "not_found");
  }
  // Within an organisation, first come first served.
  for (size_t i = 1; i < a_done.size(); ++i) {
    EXPECT_LT(a_done[i - 1]["attempts"][0]["started_at"].get<double>(),
              a_done[i]["attempts"][0]["started_at"].get<double>())
        << a_jobs[i - 1] << " vs " << a_jobs[i];
  }
  // One slot: the attempts never overlap.
  std::vector<std::pair<double, double>> spans;
  for (const Json& j : all)
    for (const Json& a : j["attempts"])
      spans.push_back({a["started_at"].get<double>(), a["ended_at"].get<double>()});
  std::sort(spans.begin(), spans.end());
  for (size_t i = 1; i < spans.size(); ++i) {
    EXPECT_GE(spans[i].first + 1e-3, spans[i - 1].second) << "two attempts ran at once on one slot";
  }
}

// 7b. Pause and resume (OpenAI's): a running job's worker writes a state
// checkpoint and stops; the job waits, paused, until resumed; then it goes
// on from that checkpoint and succeeds, at no cost to its retries.
TEST_F(JobsTest, PauseStopsAtACheckpointAndResumeGoesOnFromIt) {
  Server& s = Shared();
  const std::string id = s.Submit(Spec(TrainFile(), 40, {{"checkpoint_every", 100}}));
  ASSERT_TRUE(WaitRunningAtStep(s, id, 2)) << s.Diagnose(id);
  Resp p = s.Post("/v1/fine_tuning/jobs/" + id + "/pause", Json::object());
  ASSERT_EQ(p.status, 200) << p.Describe();
  EXPECT_EQ(p.body["status"], "paused");
  Json job = s.WaitAttemptsSettled(id, 30);
  EXPECT_EQ(job["status"], "paused") << s.Diagnose(id);
  EXPECT_EQ(Outcomes(job), std::vector<std::string>{"preempted"}) << s.Diagnose(id);
  const int64_t paused_at = job["step"].get<int64_t>();
  EXPECT_GT(paused_at, 0);
  EXPECT_LT(paused_at, 40);
  EXPECT_TRUE(AnyMessage(s.Events(id), "The job was paused")) << s.Diagnose(id);
  // The state checkpoint it stopped at is there, though checkpoint_every is past the end.
  const Json cps = s.GetOk("/v1/fine_tuning/jobs/" + id + "/checkpoints")["data"];
  ASSERT_FALSE(cps.empty()) << s.Diagnose(id);
  const int64_t saved = cps[0]["step_number"].get<int64_t>();
  EXPECT_GT(saved, 0);
  std::this_thread::sleep_for(std::chrono::seconds(2));
  EXPECT_EQ(s.Job(id)["status"], "paused") << "nothing requeues it";
  ExpectError(s.Post("/v1/fine_tuning/jobs/" + id + "/pause", Json::object()), 409, "failed_precondition");

  Resp r = s.Post("/v1/fine_tuning/jobs/" + id + "/resume", Json::object());
  ASSERT_EQ(r.status, 200) << r.Describe();
  EXPECT_EQ(r.body["status"], "queued");
  job = s.WaitJob(id);
  EXPECT_EQ(job["status"], "succeeded") << s.Diagnose(id);
  ASSERT_EQ(job["attempts"].size(), 2u) << s.Diagnose(id);
  EXPECT_EQ(job["attempts"][1]["resumed_from_step"], saved) << job["attempts"].dump();
  EXPECT_EQ(job["step"], 40);
  EXPECT_TRUE(AnyMessage(s.Events(id), "The job was resumed")) << s.Diagnose(id);
  ExpectError(s.Post("/v1/fine_tuning/jobs/" + id + "/resume", Json::object()), 409, "failed_precondition");
}

// 7. Cancel: a running job's worker stops within seconds; a queued job never runs.
TEST_F(JobsTest, CancelStopsARunningJobAndDropsAQueuedOne) {
  Server& s = Shared();
  const std::string running = s.Submit(Spec(TrainFile(), 300, {{"checkpoint_every", 50}}));
  ASSERT_TRUE(WaitRunningAtStep(s, running, 2)) << s.Diagnose(running);
  const std::string queued = s.Submit(Spec(TrainFile(), 3));
  EXPECT_EQ(s.Job(queued)["status"], "queued");

  Resp cq = s.Post("/v1/fine_tuning/jobs/" + queued + "/cancel", Json::object());
  ASSERT_EQ(cq.status, 200) << cq.Describe();
  EXPECT_EQ(cq.body["status"], "cancelled");
  EXPECT_TRUE(cq.body["attempts"].empty()) << cq.raw;

  const auto t0 = SteadyClock::now();
  Resp cr = s.Post("/v1/fine_tuning/jobs/" + running + "/cancel", Json::object());
  ASSERT_EQ(cr.status, 200) << cr.Describe();
  EXPECT_EQ(cr.body["status"], "cancelled");
  EXPECT_TRUE(WaitUntil([&] { return s.WorkerOf(running).is_null(); }, 10))
      << "a worker is still busy on the cancelled job" << s.Diagnose(running);
  const double stop_s = std::chrono::duration<double>(SteadyClock::now() - t0).count();
  EXPECT_LT(stop_s, 10.0);
  Json job = s.WaitAttemptsSettled(running, 15);
  EXPECT_EQ(job["status"], "cancelled") << s.Diagnose(running);
  EXPECT_EQ(Outcomes(job), std::vector<std::string>{"cancelled"}) << s.Diagnose(running);
  EXPECT_TRUE(job["fine_tuned_model"].is_null());
  EXPECT_LT(job["step"].get<int64_t>(), 300);
  EXPECT_TRUE(AnyMessage(s.Events(running), "cancelled")) << s.Diagnose(running);
  EXPECT_EQ(s.GetOk("/v1/fine_tuning/jobs/" + running + "/logs?limit=10000")["done"], true);

  // A cancelled job cannot be cancelled again, and the queued one never ran.
  ExpectError(s.Post("/v1/fine_tuning/jobs/" + running + "/cancel", Json::object()), 409,
              "failed_precondition");
  ExpectError(s.Post("/v1/fine_tuning/jobs/ftjob-doesnotexist/cancel", Json::object()), 404, "not_found");
  Json q = s.Job(queued);
  EXPECT_EQ(q["status"], "cancelled");
  EXPECT_TRUE(q["attempts"].empty()) << q.dump();
  EXPECT_EQ(q["usage"]["seconds"].get<double>(), 0.0) << q.dump();
  // The pool is free for the next job.
  const std::string next = s.Submit(Spec(TrainFile(), 2));
  EXPECT_EQ(s.WaitJob(next)["status"], "succeeded") << s.Diagnose(next);
  EXPECT_TRUE(s.Job(queued)["attempts"].empty());
}

// 9. Idempotency-Key: the same key and body give the same job; another body is 409.
TEST_F(JobsTest, IdempotencyKeyReturnsTheSameJobOrConflicts) {
  Server& s = Shared();
  const size_t before = s.GetOk("/v1/fine_tuning/jobs?limit=10000")["data"].size();
  const std::string key = "e2e-" + RandomSuffix();
  const httplib::Headers idem = {{"Idempotency-Key", key}};
  Json body = Spec(TrainFile(), 2);
  Resp r1 = s.Post("/v1/fine_tuning/jobs", body, "", idem);
  ASSERT_EQ(r1.status, 200) << r1.Describe();
  const std::string id = r1.body["id"];
  Resp r2 = s.Post("/v1/fine_tuning/jobs", body, "", idem);
  ASSERT_EQ(r2.status, 200) << r2.Describe();
  EXPECT_EQ(r2.body["id"], id);
  // The same body spelt differently (other key order, spaces) is the same request.
  std::string respelt = "{ \"recipe\": " + body["recipe"].dump() + ", \"training_file\": \"" + TrainFile() +
                        "\", \"model\": \"burst-small\" }";
  Resp r3 = s.Send("POST", "/v1/fine_tuning/jobs", respelt, "", idem);
  ASSERT_EQ(r3.status, 200) << r3.Describe();
  EXPECT_EQ(r3.body["id"], id);
  // Another body under the same key.
  Json other = Spec(TrainFile(), 3);
  Resp conflict = s.Post("/v1/fine_tuning/jobs", other, "", idem);
  ExpectError(conflict, 409, "already_exists", "idempotency_key", id);
  EXPECT_EQ(s.GetOk("/v1/fine_tuning/jobs?limit=10000")["data"].size(), before + 1);
  // Another organisation's key space is its own.
  if (std::optional<OrgKey> b = OrgB()) {
    Resp rb = s.Post("/v1/fine_tuning/jobs", Spec(org_b_file_, 2), b->key, idem);
    ASSERT_EQ(rb.status, 200) << rb.Describe();
    EXPECT_NE(rb.body["id"], id);
    EXPECT_EQ(s.WaitJob(rb.body["id"], 180, b->key)["status"], "succeeded");
  }
  EXPECT_EQ(s.WaitJob(id)["status"], "succeeded") << s.Diagnose(id);
}

// 10. Bad requests are 400/401/404 with the error shape, and create nothing.
// A server of its own: a request that crashes the server must not take the
// other tests down with it.
TEST_F(JobsTest, BadRequestsAreRejectedAndCreateNothing) {
  Server s(kFastFlags);
  s.Start();
  const std::string f = s.Upload("support-train.jsonl", Slurp(SupportTrain()));
  std::optional<OrgKey> b = s.CreateOrg("team-b");
  const std::string b_file = b ? s.Upload("support-train.jsonl", Slurp(SupportTrain()), b->key) : "";
  // One job that exists, to compare the list against and to probe across organisations.
  const std::string existing = s.Submit(Spec(f, 2));
  ASSERT_EQ(s.WaitJob(existing)["status"], "succeeded") << s.Diagnose(existing);
  const Json jobs_before = s.GetOk("/v1/fine_tuning/jobs?limit=10000")["data"];
  auto post = [&](const Json& body) { return s.Post("/v1/fine_tuning/jobs", body); };
  Json base = {{"model", "burst-small"}, {"training_file", f}};
  auto with = [&](const std::string& k, const Json& v) {
    Json j = base;
    j[k] = v;
    return j;
  };

  ExpectError(post(with("bogus_field", 1)), 400, "invalid_argument", "bogus_field", "bogus_field");
  ExpectError(post(with("max_retries", "3")), 400, "invalid_argument", "max_retries");
  ExpectError(post(with("model", 7)), 400, "invalid_argument", "model");
  ExpectError(post(with("training_file", "file-doesnotexist")), 400, "invalid_argument", "training_file");
  ExpectError(post({{"model", "burst-small"}}), 400, "invalid_argument", "training_file");
  ExpectError(post(with("validation_file", "file-doesnotexist")), 400, "invalid_argument", "validation_file");
  ExpectError(post(with("recipe", {{"lora", {{"rank", "big"}}}})), 400, "invalid_argument",
              "recipe.lora.rank");
  ExpectError(post(with("recipe", {{"model", "burst-small"}})), 400, "invalid_argument", "recipe.model");
  ExpectError(post(with("recipe", {{"no_such_recipe_field", 1}})), 400, "invalid_argument",
              "recipe.no_such_recipe_field");
  ExpectError(post(with("method", {{"type", "rlhf"}})), 400, "invalid_argument", "method.type");
  ExpectError(post(with("timeout_s", -1)), 400, "invalid_argument", "timeout_s");
  ExpectError(s.Send("POST", "/v1/fine_tuning/jobs", "{not json"), 400, "invalid_argument", "body");
  ExpectError(s.Send("POST", "/v1/fine_tuning/jobs", "[1,2]"), 400, "invalid_argument", "body");
  {
    Json huge = base;
    huge["metadata"] = {{"note", std::string(5 << 20, 'x')}};  // a 5 MiB JSON body
    ExpectError(s.Post("/v1/fine_tuning/jobs", huge), 413, "resource_exhausted", "body");
  }
  ExpectError(s.Send("POST", "/v1/fine_tuning/jobs", base.dump(), "", {}, /*auth=*/false), 401,
              "unauthenticated");
  ExpectError(s.Post("/v1/fine_tuning/jobs", base, "burst-not-a-key"), 401, "unauthenticated");
  ExpectError(s.Get("/v1/fine_tuning/jobs/ftjob-doesnotexist"), 404, "not_found");
  ExpectError(s.Get("/v1/fine_tuning/jobs/ftjob-doesnotexist/events"), 404, "not_found");
  ExpectError(s.Get("/v1/fine_tuning/jobs/ftjob-doesnotexist/checkpoints"), 404, "not_found");
  ExpectError(s.Get("/v1/fine_tuning/jobs/ftjob-doesnotexist/logs"), 404, "not_found");
  ExpectError(s.Send("GET", "/v1/workers", "", "", {}, /*auth=*/false), 401, "unauthenticated");
  ExpectError(s.Send("GET", "/v1/usage", "", "", {}, /*auth=*/false), 401, "unauthenticated");
  ExpectError(s.Get("/v1/usage?start=yesterday"), 400, "invalid_argument", "start");
  ExpectError(s.Get("/v1/fine_tuning/jobs?limit=0"), 400, "invalid_argument", "limit");
  // API keys are not worker tokens.
  ExpectError(s.Post("/internal/v1/lease", {{"wait_ms", 0}}), 401, "unauthenticated");
  // Another organisation's file or job is as unknown as a missing one.
  if (b) {
    ExpectError(post(with("training_file", b_file)), 400, "invalid_argument", "training_file");
    ExpectError(s.Post("/v1/fine_tuning/jobs", base, b->key), 400, "invalid_argument", "training_file");
    ExpectError(s.Get("/v1/fine_tuning/jobs/" + existing, b->key), 404, "not_found");
    ExpectError(s.Post("/v1/fine_tuning/jobs/" + existing + "/cancel", Json::object(), b->key), 404,
                "not_found");
  } else {
    std::printf(
        "[note] this build has no `burst orgs create`: other organisations' files and jobs not checked\n");
  }
  ASSERT_TRUE(s.Alive()) << s.State();

  // Models that are not there. (An unknown name crashes `burst serve`: keep these last.)
  ExpectError(post(with("model", "/etc")), 400, "invalid_argument", "model");
  ASSERT_TRUE(s.Alive()) << "POST a job with model \"/etc\" crashed the server" << s.State();
  ExpectError(post(with("model", "no-such-model")), 400, "invalid_argument", "model", "no-such-model");
  ASSERT_TRUE(s.Alive()) << "POST a job with an unknown model name crashed the server" << s.State();

  std::vector<std::string> ids_before, ids_after;
  for (const Json& j : jobs_before) ids_before.push_back(j["id"]);
  const Json jobs_after = s.GetOk("/v1/fine_tuning/jobs?limit=10000")["data"];
  for (const Json& j : jobs_after) ids_after.push_back(j["id"]);
  EXPECT_EQ(ids_after, ids_before) << "a rejected request created a job";
}

// 10b. GET /v1/models lists the models a job may name (a server of its own:
// a broken listing must not corrupt the shared server).
TEST_F(JobsTest, ModelsListsTheShippedModel) {
  Server s(kFastFlags);
  s.Start();
  Resp models = s.Get("/v1/models");
  ASSERT_EQ(models.status, 200) << models.Describe();
  std::vector<std::string> ids;
  for (const Json& m : models.body["data"]) ids.push_back(m.value("id", "?"));
  EXPECT_EQ(ids, std::vector<std::string>{"burst-small"}) << models.raw;
  for (const Json& m : models.body["data"]) {
    EXPECT_EQ(m["object"], "model") << m.dump();
    EXPECT_EQ(m["owned_by"], "burst") << m.dump();
    EXPECT_GT(m.value("created", int64_t{0}), 0) << m.dump();
    EXPECT_FALSE(m.contains("path")) << "the server's folders stay its own: " << m.dump();
  }
  Resp one = s.Get("/v1/models/burst-small");
  ASSERT_EQ(one.status, 200) << one.Describe();
  EXPECT_EQ(one.body["architecture"], "LlamaForCausalLM");
  EXPECT_TRUE(s.Alive()) << s.State();
}

// 11. A recipe the data cannot satisfy fails at once, naming file and line,
// without retries.
TEST_F(JobsTest, DeterministicFailureFailsOnceNamingTheLine) {
  Server& s = Shared();
  const std::string id = s.Submit(Spec(TrainFile(), 4, {{"max_seq_len", 8}, {"truncate", false}}));
  Json job = s.WaitJob(id);
  ASSERT_EQ(job["status"], "failed") << s.Diagnose(id);
  job = s.WaitAttemptsSettled(id);
  EXPECT_EQ(Outcomes(job), std::vector<std::string>{"failed"}) << s.Diagnose(id);
  ASSERT_TRUE(job["error"].is_object()) << job.dump();
  const std::string message = job["error"].value("message", "");
  const std::string param = job["error"]["param"].is_string() ? job["error"]["param"].get<std::string>() : "";
  EXPECT_EQ(job["error"]["code"], "invalid_argument") << job.dump();
  // FILE:LINE, where FILE is what the user knows (the file id, or the name
  // it was uploaded under), not the worker's scratch copy.
  std::regex file_line("(" + TrainFile() + "|support-train\\.jsonl):[0-9]+");
  EXPECT_TRUE(std::regex_search(param, file_line)) << "param is not FILE:LINE: " << job["error"].dump();
  EXPECT_TRUE(std::regex_search(message, file_line)) << "message names no FILE:LINE: " << job["error"].dump();
  EXPECT_FALSE(Contains(message + param, (s.data() / "workers" / "scratch").string()))
      << "the error leaks the worker's scratch path: " << job["error"].dump();
  Json events = s.Events(id);
  EXPECT_FALSE(AnyMessage(events, "requeued")) << s.Diagnose(id);
  EXPECT_EQ(job["attempts"].size(), 1u);
}

// 13. Sampling pinned to a checkpoint: OpenAI's chat completion against
// JOB:step-N answers what `burst sample` answers on that checkpoint's sampler
// folder, and keeps answering it after later checkpoints exist.
TEST_F(JobsTest, ChatCompletionIsPinnedToItsCheckpoint) {
  Server& s = Shared();
  const std::string id = s.Submit(Spec(TrainFile(), 4));
  Json job = s.WaitJob(id);
  ASSERT_EQ(job["status"], "succeeded") << s.Diagnose(id);
  Json ticket = ParseJson(Slurp(SourceDir() / "examples/support/ticket.json"), "ticket.json");
  Json messages = ticket.is_object() ? ticket["messages"] : ticket;
  auto chat = [&](const std::string& model) {
    return s.Post("/v1/chat/completions", {{"model", model},
                                           {"messages", messages},
                                           {"temperature", 0},
                                           {"max_tokens", 8},
                                           {"logprobs", true}});
  };
  Resp r2 = chat(id + ":step-2");
  ASSERT_EQ(r2.status, 200) << r2.Describe();
  EXPECT_EQ(r2.body["object"], "chat.completion");
  ASSERT_EQ(r2.body["choices"].size(), 1u);
  const Json& c = r2.body["choices"][0];
  EXPECT_EQ(c["message"]["role"], "assistant");
  const std::string text2 = c["message"]["content"];
  EXPECT_GT(r2.body["usage"]["prompt_tokens"].get<int64_t>(), 0);
  EXPECT_EQ(r2.body["usage"]["completion_tokens"].get<size_t>(), c["logprobs"]["content"].size());

  // The same checkpoint sampled by the CLI, from its folder in the store.
  fs::path sampler = JobStoreDir(s, job) / "checkpoints" / "step-00000002" / "sampler";
  ProcResult cli = RunBurst({"sample", "--model", sampler.string(), "--messages",
                             (SourceDir() / "examples/support/ticket.json").string(), "--temperature", "0",
                             "--max-tokens", "8", "--json", "--threads", "1"});
  ASSERT_TRUE(cli.ok()) << cli.Describe();
  Json local = Json::parse(cli.out);
  EXPECT_EQ(local["samples"][0]["text"], text2);
  ASSERT_EQ(local["samples"][0]["logprobs"].size(), c["logprobs"]["content"].size());
  for (size_t i = 0; i < c["logprobs"]["content"].size(); ++i) {
    EXPECT_NEAR(local["samples"][0]["logprobs"][i].get<double>(),
                c["logprobs"]["content"][i]["logprob"].get<double>(), 1e-4);
  }
  // The checkpoint downloaded (`burst checkpoints download`: the tar of
  // GET .../checkpoints/{ckpt}/content, unpacked) is a folder `burst sample`
  // loads anywhere: its adapter names the base model by name, not by the
  // server's folder; a model card and a manifest of what was shipped come with it.
  const fs::path out = s.data() / "downloads";
  ProcResult dl = RunBurst({"checkpoints", "download", id, "2", "-o", out.string(), "--url",
                            "http://127.0.0.1:" + std::to_string(s.port()), "--api-key", s.key()});
  ASSERT_TRUE(dl.ok()) << dl.Describe() << s.Diagnose(id);
  const fs::path got = out / (id + "-step-2");
  Json adapter = ParseJson(Slurp(got / "adapter_config.json"), "adapter_config.json");
  EXPECT_EQ(adapter["base_model_name_or_path"], "burst-small");
  const std::string card = Slurp(got / "README.md");
  EXPECT_TRUE(Contains(card, "`burst-small`")) << card;
  EXPECT_TRUE(Contains(card, "WordNet 3.0 Copyright 2006 by Princeton University")) << card;
  Json manifest = ParseJson(Slurp(got / "manifest.json"), "manifest.json");
  ASSERT_TRUE(manifest["files"].contains("adapter_model.safetensors")) << manifest.dump(1);
  for (const auto& [name, f] : manifest["files"].items()) {
    EXPECT_EQ(f["bytes"].get<uint64_t>(), fs::file_size(got / name)) << name;
  }
  EXPECT_EQ(manifest["files"]["adapter_model.safetensors"]["bytes"].get<uint64_t>(),
            fs::file_size(sampler / "adapter_model.safetensors"));
  ProcResult dl_cli = RunBurst({"sample", "--model", got.string(), "--messages",
                                (SourceDir() / "examples/support/ticket.json").string(), "--temperature", "0",
                                "--max-tokens", "8", "--json", "--threads", "1"});
  ASSERT_TRUE(dl_cli.ok()) << dl_cli.Describe();
  EXPECT_EQ(Json::parse(dl_cli.out)["samples"][0]["text"], text2)
      << "the downloaded folder answers as the API";
  ProcResult missing = RunBurst({"checkpoints", "download", id, "3", "-o", out.string(), "--url",
                                 "http://127.0.0.1:" + std::to_string(s.port()), "--api-key", s.key()});
  EXPECT_FALSE(missing.ok());
  EXPECT_TRUE(Contains(missing.err + missing.out, "no checkpoint 3")) << missing.Describe();
  // The tar streams to a file and is unpacked from it: nothing is left
  // beside the folder (the tar, or a failed download's part).
  std::vector<std::string> left;
  for (const auto& e : fs::directory_iterator(out)) left.push_back(e.path().filename().string());
  EXPECT_EQ(left, std::vector<std::string>{id + "-step-2"});
  // --tar keeps the tar itself.
  const fs::path tar = s.data() / "step-2.tar";
  ProcResult kept = RunBurst({"checkpoints", "download", id, "2", "--tar", tar.string(), "--url",
                              "http://127.0.0.1:" + std::to_string(s.port()), "--api-key", s.key()});
  ASSERT_TRUE(kept.ok()) << kept.Describe();
  EXPECT_TRUE(Contains(kept.out, "wrote " + tar.string())) << kept.out;
  EXPECT_GT(fs::file_size(tar), fs::file_size(sampler / "adapter_model.safetensors"));

  // A later checkpoint does not change what the earlier name returns; the
  // checkpoint id names the same weights.
  Resp r4 = chat(id + ":step-4");
  ASSERT_EQ(r4.status, 200) << r4.Describe();
  Resp again = chat(id + ":step-2");
  ASSERT_EQ(again.status, 200) << again.Describe();
  EXPECT_EQ(again.body["choices"][0]["message"]["content"], text2);
  Json cps = s.GetOk("/v1/fine_tuning/jobs/" + id + "/checkpoints")["data"];
  std::string ckpt2;
  for (const Json& cp : cps)
    if (cp["step_number"] == 2) ckpt2 = cp["id"];
  ASSERT_FALSE(ckpt2.empty()) << cps.dump();
  Resp by_id = chat(ckpt2);
  ASSERT_EQ(by_id.status, 200) << by_id.Describe();
  EXPECT_EQ(by_id.body["choices"][0]["message"]["content"], text2);

  // Plain completions from the base model, n samples.
  Resp base =
      s.Post("/v1/completions",
             {{"model", "burst-small"}, {"prompt", "A dog is"}, {"max_tokens", 5}, {"n", 2}, {"seed", 3}});
  ASSERT_EQ(base.status, 200) << base.Describe();
  EXPECT_EQ(base.body["object"], "text_completion");
  EXPECT_EQ(base.body["choices"].size(), 2u);

  // Bad requests name the field.
  ExpectError(chat("ftjob-nosuchjob:step-2"), 404, "not_found", "model");
  ExpectError(chat(id + ":step-3"), 404, "not_found", "model");
  // Streamed: server-sent events whose deltas add up to the same text.
  Resp st = s.Post("/v1/chat/completions", {{"model", id + ":step-2"},
                                            {"messages", messages},
                                            {"temperature", 0},
                                            {"max_tokens", 8},
                                            {"stream", true}});
  ASSERT_EQ(st.status, 200) << st.Describe();
  std::string streamed, finish;
  size_t events = 0;
  bool done_marker = false;
  for (const std::string& line : Lines(st.raw)) {
    if (line.empty()) continue;
    ASSERT_EQ(line.rfind("data: ", 0), 0u) << line;
    const std::string data = line.substr(6);
    if (data == "[DONE]") {
      done_marker = true;
      continue;
    }
    Json ev = Json::parse(data);
    EXPECT_EQ(ev["object"], "chat.completion.chunk");
    const Json& ch = ev["choices"][0];
    if (events++ == 0) {
      EXPECT_EQ(ch["delta"]["role"], "assistant");
    }
    if (ch["delta"].contains("content")) streamed += ch["delta"]["content"].get<std::string>();
    if (ch["finish_reason"].is_string()) finish = ch["finish_reason"];
  }
  EXPECT_TRUE(done_marker);
  EXPECT_EQ(streamed, text2);
  EXPECT_EQ(finish, c["finish_reason"]);
  ExpectError(s.Post("/v1/chat/completions", {{"model", id + ":step-2"}, {"messages", messages}, {"n", 0}}),
              400, "invalid_argument", "n");
  ExpectError(s.Post("/v1/chat/completions",
                     {{"model", id + ":step-2"}, {"messages", {{{"role", "robot"}, {"content", "hi"}}}}}),
              400, "invalid_argument", "messages[0].role");
  ExpectError(s.Post("/v1/completions", {{"model", "burst-small"}, {"prompt", "x"}, {"temprature", 1}}), 400,
              "invalid_argument", "temprature");
  if (std::optional<OrgKey> b = OrgB()) {
    ExpectError(s.Post("/v1/chat/completions", {{"model", id + ":step-2"}, {"messages", messages}}, b->key),
                404, "not_found", "model");
  }
  // Billed as sampling.
  Json usage = s.GetOk("/v1/usage");
  bool sampling = false;
  for (const Json& l : usage["data"]) sampling = sampling || l["line"] == "sampling";
  EXPECT_TRUE(sampling) << usage.dump();
}

// 13b. With a validation file, the baseline and every checkpoint are evaluated.
TEST_F(JobsTest, EveryCheckpointIsEvaluatedAgainstTheBaseline) {
  Server& s = Shared();
  std::string valid;
  int lines = 0;
  for (const std::string& l : Lines(Slurp(SupportValid())))
    if (!l.empty() && lines++ < 12) valid += l + "\n";
  Json spec = Spec(TrainFile(), 4);
  spec["validation_file"] = s.Upload("valid-12.jsonl", valid);
  const std::string id = s.Submit(spec);
  Json job = s.WaitJob(id);
  ASSERT_EQ(job["status"], "succeeded") << s.Diagnose(id);
  EXPECT_EQ(job["recipe"]["eval_every"], 2);
  ASSERT_TRUE(job["result"]["baseline"].is_object()) << job.dump();
  ASSERT_TRUE(job["result"]["final"].is_object()) << job.dump();
  Json cps = s.GetOk("/v1/fine_tuning/jobs/" + id + "/checkpoints")["data"];
  ASSERT_EQ(cps.size(), 2u) << cps.dump();
  for (const Json& cp : cps) {
    EXPECT_TRUE(cp["metrics"]["valid_loss"].is_number()) << cp.dump();
    EXPECT_TRUE(cp["metrics"]["valid_mean_token_accuracy"].is_number()) << cp.dump();
    // "Better than the baseline" is one field of the checkpoint.
    EXPECT_EQ(cp["metrics"]["baseline"]["eval_loss"], job["result"]["baseline"]["eval_loss"]) << cp.dump();
    const Json& vs = cp["vs_baseline"];
    ASSERT_TRUE(vs.is_object()) << cp.dump();
    EXPECT_NEAR(
        vs["eval_loss"].get<double>(),
        cp["metrics"]["eval_loss"].get<double>() - job["result"]["baseline"]["eval_loss"].get<double>(),
        1e-12);
    EXPECT_EQ(vs["better_than_baseline"], vs["eval_loss"].get<double>() < 0) << cp.dump();
  }
  EXPECT_NEAR(cps[0]["metrics"]["valid_loss"].get<double>(),
              job["result"]["final"]["eval_loss"].get<double>(), 1e-9);
}

// 14. Capacity is not quota. A full pool answers a synchronous sampling call
// that cannot wait with 429 capacity and retry_after (a job would just
// queue); an organisation over its cap gets 429 org_cap naming the limit.
TEST_F(JobsTest, SamplingWithEverySlotBusyIs429Capacity) {
  std::vector<std::string> flags = kFastFlags;
  flags.insert(flags.end(), {"--sample-wait", "1", "--org-max-jobs", "1"});
  Server s(flags);
  s.Start();
  const std::string file = s.Upload("support-train.jsonl", Slurp(SupportTrain()));
  const std::string id = s.Submit(Spec(file, 200));
  ASSERT_TRUE(WaitUntil([&] { return s.Job(id)["step"].get<int64_t>() >= 1; }, 60)) << s.Diagnose(id);
  Resp r = s.Post("/v1/completions", {{"model", "burst-small"}, {"prompt", "A dog is"}, {"max_tokens", 4}});
  EXPECT_EQ(r.status, 429) << r.Describe();
  EXPECT_EQ(r.body["error"]["code"], "capacity");
  EXPECT_EQ(r.body["error"]["details"]["limit"], "capacity") << r.raw;
  EXPECT_GT(r.body["retry_after"].get<int>(), 0);
  Resp capped = s.Post("/v1/fine_tuning/jobs", Spec(file, 2));
  ExpectError(capped, 429, "org_cap", "max_active_jobs");
  EXPECT_EQ(capped.body["error"]["details"]["limit"], "org_cap") << capped.raw;
  s.Post("/v1/fine_tuning/jobs/" + id + "/cancel", Json::object());
  ASSERT_TRUE(WaitUntil([&] { return s.Post("/v1/fine_tuning/jobs", Spec(file, 2)).status == 200; }, 30))
      << "the cap frees up when the job ends";
}

// 15. The usage ledger equals the worker lifetimes: every second is one
// job's (startup, training) or idle, and the sum matches the lifetimes the
// pool poller observed (within the one-second resolution /v1/workers gives).
TEST_F(JobsTest, LedgerEqualsObservedWorkerLifetimes) {
  Server& s = Shared();
  const std::string id = s.Submit(Spec(TrainFile(), 3));
  ASSERT_EQ(s.WaitJob(id)["status"], "succeeded") << s.Diagnose(id);
  ASSERT_TRUE(WaitUntil([&] { return s.PoolEmpty(); }, kScaledownS + 30)) << s.Workers().dump();
  // Let the poller see the pool empty too.
  const int64_t polls = s.Polls();
  ASSERT_TRUE(WaitUntil([&] { return s.Polls() >= polls + 2; }, 10));
  EXPECT_LE(s.MaxPool(), static_cast<size_t>(kSlots)) << "more workers than slots at once";

  std::vector<OrgKey> orgs = {s.admin()};
  if (std::optional<OrgKey> b = OrgB()) orgs.push_back(*b);
  double billed = 0;
  for (const OrgKey& o : orgs) {
    Json usage = s.GetOk("/v1/usage", o.key);
    double lines = 0, idle = 0, cost = 0;
    const double price = usage["prices"]["dedicated"]["cpu"]["per_slot_second"].get<double>();
    for (const Json& l : usage["data"]) {
      const std::string line = l["line"];
      EXPECT_TRUE(line == "training" || line == "startup" || line == "idle" || line == "sampling")
          << l.dump();
      lines += l["seconds"].get<double>();
      cost += l["cost"].get<double>();
      if (line == "idle" || line == "sampling") idle += l["seconds"].get<double>();  // not any job's
      // Dedicated scope: worker-seconds at the slot price. Serverless: the
      // worker time at cost 0, and tokens billed instead.
      const double c = l["cost"].get<double>(), secs = l["seconds"].get<double>();
      if (l["scope"] == "dedicated") {
        EXPECT_NEAR(c, secs * price, 1e-6 * std::max(1.0, secs * price)) << l.dump();
      } else {
        EXPECT_EQ(l["scope"], "serverless") << l.dump();
        EXPECT_EQ(c > 0, l["tokens"].get<int64_t>() > 0) << l.dump();
      }
    }
    const double total = usage["total_seconds"].get<double>();
    EXPECT_NEAR(total, lines, 1e-6);
    EXPECT_NEAR(usage["total_cost"].get<double>(), cost, 1e-9);
    double jobs_s = 0;
    size_t njobs = 0;
    const Json jobs = s.GetOk("/v1/fine_tuning/jobs?limit=10000", o.key)["data"];
    for (const Json& j : jobs) {
      jobs_s += j["usage"]["seconds"].get<double>();
      ++njobs;
    }
    EXPECT_NEAR(total, jobs_s + idle, 0.001 * static_cast<double>(njobs + 1))
        << "org " << o.org_id << ": the ledger's seconds are not its jobs' plus idle\n"
        << usage.dump();
    billed += total;
  }

  // The server's record of each exited worker: its lifetime (start request
  // to observed exit, in ms), the part of it spent in the cluster's queue
  // (Slurm's pending time, never billed; ~0 for local workers) and the
  // seconds billed for it, summed over the organisations it served.
  std::map<std::string, double> billed_by_worker;
  std::map<std::string, int64_t> lifetime_ms, queued_ms;
  for (const OrgKey& o : orgs) {
    Json pool = s.GetOk("/v1/workers?include=exited", o.key);
    ASSERT_TRUE(pool.contains("exited")) << pool.dump();
    for (const Json& w : pool["exited"]) {
      lifetime_ms[w["id"]] = w["exited_ms"].get<int64_t>() - w["requested_ms"].get<int64_t>();
      queued_ms[w["id"]] = w["queued_ms"].get<int64_t>();
      EXPECT_GE(queued_ms[w["id"]], 0) << w.dump();
      EXPECT_LE(queued_ms[w["id"]], lifetime_ms[w["id"]]) << w.dump();
      for (const auto& [line, secs] : w["billed_seconds"].items())
        billed_by_worker[w["id"]] += secs.get<double>();
    }
  }

  // Observed lifetimes: each worker lived from its start request (second
  // resolution) until the server saw it exit, which lies between the last
  // poll that listed it and the first that did not; all of it is billed
  // but its time in the queue.
  double lo = 0, hi = 0;
  size_t workers = 0;
  for (const auto& [wid, w] : s.Seen()) {
    ASSERT_GT(w.gone_recv_ms, 0) << wid << " never seen leaving";
    ASSERT_GE(w.requested_at, 0) << wid;
    const int64_t queued = queued_ms.count(wid) ? queued_ms[wid] : 0;
    lo += static_cast<double>(w.last_present_sent_ms - (w.requested_at + 1) * 1000 - queued) / 1000.0;
    hi += static_cast<double>(w.gone_recv_ms - w.requested_at * 1000) / 1000.0;
    ++workers;
  }
  EXPECT_GT(workers, 0u);
  EXPECT_GE(billed, lo - 0.05) << workers << " workers";
  EXPECT_LE(billed, hi + 0.05) << workers << " workers";
  std::printf("[ledger] %zu workers, billed %.3f s, observed lifetimes in [%.3f, %.3f] s\n", workers, billed,
              lo, hi);

  // Exactly, per worker: its lifetime less its queue time is what was billed.
  EXPECT_EQ(lifetime_ms.size(), workers) << "every worker the poller saw is in the ledger";
  for (const auto& [wid, ms] : lifetime_ms) {
    EXPECT_NEAR(billed_by_worker[wid], static_cast<double>(ms - queued_ms[wid]) / 1000.0, 1e-6) << wid;
  }
}

}  // namespace
}  // namespace burst::e2e::jobs
