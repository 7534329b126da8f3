// End-to-end tests of deployments and of evaluations run as jobs: a real
// `burst serve` with 2 slots of 1 thread (real `burst worker` replicas),
// spoken to over HTTP and through `burst deployments` / `burst eval
// --remote`. One tiny job (4 steps) gives the checkpoint every test deploys
// or evaluates; the suite takes about a minute.
#include <gtest/gtest.h>
#include <httplib.h>

#include <atomic>
#include <memory>
#include <regex>

#include "e2e_http.h"
#include "e2e_slurm.h"

namespace burst::e2e {
namespace {

constexpr double kWindowS = 2;  // the deployments' scaledown window in these tests

// The executor, local or Slurm (e2e_slurm.h), for the whole binary.
const ::testing::Environment* const kExecutor = ::testing::AddGlobalTestEnvironment(new E2eExecutor);

class DeploymentsTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    server_ = new ServeProcess(
        "burst-e2e-deployments",
        E2eExecutor::With({"--slots", "2", "--threads-per-slot", "1", "--scaledown-window", "1"}));
    if (!server_->error().empty()) {
      start_error_ = server_->error();
      return;
    }
    dir_ = &server_->dir();
    port_ = server_->port();
    key_ = server_->key();
    WriteHead(SupportTrain(), *dir_ / "train.jsonl", 24);
    const std::string file = server_->Upload(*dir_ / "train.jsonl");
    if (file.empty()) {
      start_error_ = "upload failed";
      return;
    }
    Resp job = Send(
        "POST", "/v1/fine_tuning/jobs",
        {{"model", "burst-small"},
         {"training_file", file},
         {"recipe", {{"max_steps", 4}, {"batch_size", 4}, {"max_seq_len", 128}, {"checkpoint_every", 4}}}});
    if (job.status != 200) {
      start_error_ = "job: " + job.Describe();
      return;
    }
    job_ = job.body["id"];
    org_ = job.body["organization_id"];
    Json j;
    WaitUntil(
        [&] {
          j = Send("GET", "/v1/fine_tuning/jobs/" + job_).body;
          const std::string st = j.value("status", "");
          return st == "succeeded" || st == "failed" || st == "cancelled";
        },
        120, 100);
    if (j.value("status", "") != "succeeded") start_error_ = "the job did not succeed: " + j.dump();
    checkpoint_ = job_ + ":step-4";
  }
  static void TearDownTestSuite() {
    delete server_;  // SIGTERM, reaped
    server_ = nullptr;
    dir_ = nullptr;
  }
  void SetUp() override { ASSERT_TRUE(start_error_.empty()) << start_error_; }

  static Resp Send(const std::string& method, const std::string& path, const Json& body = Json()) {
    return server_->Send(method, path, body);
  }
  static Json Deployment(const std::string& name) { return Send("GET", "/v1/deployments/" + name).body; }
  static int64_t LiveWorkers() {
    Json w = Send("GET", "/v1/workers").body;
    return w.is_object() ? static_cast<int64_t>(w["data"].size()) : -1;
  }
  static Resp Chat(const std::string& model, int64_t max_tokens = 8) {
    return Send("POST", "/v1/chat/completions",
                {{"model", model},
                 {"messages", {{{"role", "user"}, {"content", "My order has not arrived. Where is it?"}}}},
                 {"temperature", 0},
                 {"max_tokens", max_tokens}});
  }
  ProcResult Burst(std::vector<std::string> args, double timeout_s = 60) {
    return server_->Burst(args, timeout_s);
  }

  static const TempDir* dir_;
  static ServeProcess* server_;
  static std::string start_error_, key_, job_, checkpoint_, org_;
  static int port_;
};

const TempDir* DeploymentsTest::dir_ = nullptr;
ServeProcess* DeploymentsTest::server_ = nullptr;
std::string DeploymentsTest::start_error_, DeploymentsTest::key_, DeploymentsTest::job_,
    DeploymentsTest::checkpoint_, DeploymentsTest::org_;
int DeploymentsTest::port_ = 0;

// From zero: the first call starts a replica and says it waited for it; the
// answer is the checkpoint's own; load adds a replica; after the window the
// deployment is back at zero; its time is billed on its own line; DELETE
// frees the name.
TEST_F(DeploymentsTest, ScalesFromZeroUpUnderLoadAndBackToZero) {
  ASSERT_TRUE(WaitUntil([] { return LiveWorkers() == 0; }, 30)) << "the job's worker did not leave";
  const Json body = {{"name", "support-bot"}, {"checkpoint", checkpoint_},      {"min_replicas", 0},
                     {"max_replicas", 2},     {"scaledown_window_s", kWindowS}, {"max_concurrency", 1},
                     {"scope", "dedicated"}};
  Resp created = Send("POST", "/v1/deployments", body);
  ASSERT_EQ(created.status, 200) << created.Describe();
  const Json& d = created.body;
  EXPECT_EQ(d["object"], "deployment");
  EXPECT_EQ(d["status"], "active");
  EXPECT_EQ(d["replicas"], 0);
  EXPECT_EQ(d["checkpoint"], checkpoint_);
  EXPECT_EQ(d["scope"], "dedicated");
  const std::string id = d["id"];
  Resp again = Send("POST", "/v1/deployments", body);
  ASSERT_EQ(again.status, 200) << again.Describe();
  EXPECT_EQ(again.body["id"], id) << "the same name and body is the same deployment";
  Json other = body;
  other["max_replicas"] = 1;
  Resp conflict = Send("POST", "/v1/deployments", other);
  EXPECT_EQ(conflict.status, 409) << conflict.Describe();
  EXPECT_EQ(conflict.body["error"]["param"], "name");
  EXPECT_EQ(LiveWorkers(), 0) << "min_replicas 0 starts nothing";

  Resp first = Chat("support-bot");
  ASSERT_EQ(first.status, 200) << first.Describe();
  const Json& extra = first.body["burst"];
  EXPECT_EQ(extra["deployment"], "support-bot");
  EXPECT_EQ(extra["cold_start"], true) << first.raw;
  EXPECT_GT(extra["cold_start_ms"].get<double>(), 0.0) << first.raw;
  // Exactly what the checkpoint itself answers.
  Resp pinned = Chat(checkpoint_);
  ASSERT_EQ(pinned.status, 200) << pinned.Describe();
  EXPECT_EQ(first.body["choices"][0]["message"]["content"], pinned.body["choices"][0]["message"]["content"]);
  Resp warm = Chat("support-bot");
  ASSERT_EQ(warm.status, 200) << warm.Describe();
  EXPECT_EQ(warm.body["burst"]["cold_start"], false) << warm.raw;

  // Three long calls at once on max_concurrency 1: a second replica comes.
  std::atomic<int64_t> most{0};
  std::atomic<bool> stop{false};
  std::thread watch([&] {
    while (!stop) {
      Json now = Deployment("support-bot");
      if (now.is_object()) most = std::max<int64_t>(most, now.value("replicas", int64_t{0}));
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  });
  std::vector<std::thread> calls;
  std::vector<int> codes(3, 0);
  for (int i = 0; i < 3; ++i) calls.emplace_back([&, i] { codes[i] = Chat("support-bot", 96).status; });
  for (auto& t : calls) t.join();
  stop = true;
  watch.join();
  for (int c : codes) EXPECT_EQ(c, 200);
  EXPECT_EQ(most.load(), 2) << "max_replicas 2 under a load of 3";

  // Idle past the window: back to zero replicas, and to zero workers.
  EXPECT_TRUE(WaitUntil([] { return Deployment("support-bot").value("replicas", -1) == 0; }, 10 + kWindowS))
      << Deployment("support-bot").dump();
  Json idle = Deployment("support-bot");
  EXPECT_EQ(idle["requests"], 5);
  EXPECT_GE(idle["cold_starts"].get<int64_t>(), 1);
  EXPECT_GT(idle["replica_seconds"].get<double>(), kWindowS);
  // Dedicated scope: replica-seconds at the slot price ($0.18 an hour).
  EXPECT_NEAR(idle["cost"].get<double>(), idle["replica_seconds"].get<double>() * 0.18 / 3600, 1e-9);
  const double cost = idle["cost"];
  std::this_thread::sleep_for(std::chrono::milliseconds(1200));
  EXPECT_EQ(Deployment("support-bot")["cost"].get<double>(), cost) << "nothing accrues at zero replicas";
  Json usage = Send("GET", "/v1/usage").body;
  double deployment_line = 0;
  for (const Json& l : usage["data"])
    if (l["line"] == "deployment") deployment_line += l["cost"].get<double>();
  EXPECT_NEAR(deployment_line, cost, 1e-9) << usage.dump();

  Resp del = Send("DELETE", "/v1/deployments/support-bot");
  ASSERT_EQ(del.status, 200) << del.Describe();
  EXPECT_EQ(del.body["status"], "deleted");
  Resp after = Chat("support-bot");
  EXPECT_EQ(after.status, 404) << after.Describe();
  EXPECT_EQ(Send("GET", "/v1/deployments/" + id).body["status"], "deleted") << "still readable by id";
  Resp reuse = Send("POST", "/v1/deployments", other);
  EXPECT_EQ(reuse.status, 200) << "the name is free again: " << reuse.Describe();
  EXPECT_NE(reuse.body["id"], id);
  EXPECT_EQ(Send("DELETE", "/v1/deployments/support-bot").status, 200);
}

// min_replicas 1 keeps a warm replica past the window; `burst deployments
// list` warns about it once it has been idle; DELETE stops it and its billing.
TEST_F(DeploymentsTest, MinReplicasStayWarmAreFlaggedWhenIdleAndDeleteStopsThem) {
  ProcResult create = Burst({"deployments", "create", "always-on", "--checkpoint", checkpoint_,
                             "--min-replicas", "1", "--scaledown-window", "1"});
  ASSERT_TRUE(create.ok()) << create.Describe();
  EXPECT_TRUE(Contains(create.out, "always-on")) << create.out;
  ASSERT_TRUE(WaitUntil([] { return Deployment("always-on").value("replicas", 0) == 1; }, 30));
  EXPECT_EQ(Deployment("always-on")["scope"], "dedicated") << "live replicas are dedicated capacity";
  EXPECT_TRUE(Contains(Deployment("always-on")["scope_reason"], "min_replicas 1"))
      << Deployment("always-on").dump();
  // Once the replica has loaded its checkpoint (ready), a call finds it warm.
  EXPECT_EQ(Deployment("always-on")["replica_workers"].size(), 1u);
  ASSERT_TRUE(WaitUntil([] { return Deployment("always-on").value("ready_replicas", 0) == 1; }, 30))
      << Deployment("always-on").dump();
  EXPECT_EQ(Deployment("always-on")["replica_workers"][0]["ready"], true);
  Resp r = Chat("always-on");
  ASSERT_EQ(r.status, 200) << r.Describe();
  EXPECT_EQ(r.body["burst"]["cold_start"], false) << r.raw;
  std::this_thread::sleep_for(std::chrono::milliseconds(2500));
  EXPECT_EQ(Deployment("always-on")["replicas"], 1) << "min_replicas keeps it past its window";

  ProcResult list = Burst({"deployments", "list", "--idle-warn", "1"});
  ASSERT_TRUE(list.ok()) << list.Describe();
  EXPECT_TRUE(std::regex_search(list.out, std::regex("always-on +active +" + checkpoint_ + " +1/1 +1 ")))
      << list.out;
  EXPECT_TRUE(Contains(list.err, "warning: deployment always-on has 1 replica(s) live")) << list.err;
  ProcResult quiet = Burst({"deployments", "list", "--idle-warn", "3600"});
  EXPECT_FALSE(Contains(quiet.err, "warning")) << quiet.err;

  ProcResult del = Burst({"deployments", "delete", "always-on", "--json"});
  ASSERT_TRUE(del.ok()) << del.Describe();
  Json gone = Json::parse(del.out, nullptr, false);
  ASSERT_TRUE(gone.is_object()) << del.out;
  EXPECT_EQ(gone["status"], "deleted");
  EXPECT_EQ(gone["replicas"], 0) << "DELETE answers once its replicas have exited";
  const double cost = gone["cost"];
  EXPECT_NEAR(cost, gone["replica_seconds"].get<double>() * 0.18 / 3600, 1e-9)
      << "replica-seconds at the slot price";
  std::this_thread::sleep_for(std::chrono::milliseconds(1000));
  EXPECT_EQ(Send("GET", "/v1/deployments/" + gone["id"].get<std::string>()).body["cost"].get<double>(), cost)
      << "no billing after DELETE";
}

// min_replicas 0 and no scope: serverless, billed by the calls' tokens, its
// replica's time recorded at cost 0; asking serverless with live replicas is
// refused, not fallen back from.
TEST_F(DeploymentsTest, AServerlessDeploymentBillsTokensNotReplicaTime) {
  Resp bad =
      Send("POST", "/v1/deployments",
           {{"name", "held"}, {"checkpoint", checkpoint_}, {"min_replicas", 1}, {"scope", "serverless"}});
  EXPECT_EQ(bad.status, 400) << bad.Describe();
  EXPECT_EQ(bad.body["error"]["param"], "scope");
  Resp created = Send("POST", "/v1/deployments", {{"name", "per-token"}, {"checkpoint", checkpoint_}});
  ASSERT_EQ(created.status, 200) << created.Describe();
  EXPECT_EQ(created.body["scope"], "serverless");
  Resp r = Chat("per-token");
  ASSERT_EQ(r.status, 200) << r.Describe();
  EXPECT_EQ(r.body["burst"]["scope"], "serverless");
  const int64_t tokens =
      r.body["usage"]["prompt_tokens"].get<int64_t>() + r.body["usage"]["completion_tokens"].get<int64_t>();
  const Json messages = {{{"role", "user"}, {"content", "Where is my refund?"}}};
  Resp other =
      Send("POST", "/v1/chat/completions",
           {{"model", "per-token"}, {"messages", messages}, {"max_tokens", 4}, {"scope", "dedicated"}});
  EXPECT_EQ(other.status, 400) << other.Describe();
  EXPECT_EQ(other.body["error"]["param"], "scope");
  // A call pinned to the checkpoint may ask for its scope.
  Resp pinned =
      Send("POST", "/v1/chat/completions",
           {{"model", checkpoint_}, {"messages", messages}, {"max_tokens", 4}, {"scope", "dedicated"}});
  ASSERT_EQ(pinned.status, 200) << pinned.Describe();
  EXPECT_EQ(pinned.body["burst"]["scope"], "dedicated");
  EXPECT_EQ(Send("POST", "/v1/chat/completions",
                 {{"model", checkpoint_}, {"messages", messages}, {"scope", "spot"}})
                .body["error"]["param"],
            "scope");
  Resp del = Send("DELETE", "/v1/deployments/per-token");
  ASSERT_EQ(del.status, 200) << del.Describe();
  EXPECT_GT(del.body["replica_seconds"].get<double>(), 0.0);
  const double want = (r.body["usage"]["prompt_tokens"].get<double>() * 0.02 +
                       r.body["usage"]["completion_tokens"].get<double>() * 0.05) /
                      1e6;
  EXPECT_NEAR(del.body["cost"].get<double>(), want, 1e-12) << del.raw << " (" << tokens << " tokens)";
}

TEST_F(DeploymentsTest, BadRequestsNameTheField) {
  auto expect = [&](const Json& body, int status, const std::string& param) {
    Resp r = Send("POST", "/v1/deployments", body);
    EXPECT_EQ(r.status, status) << body.dump() << " -> " << r.Describe();
    EXPECT_EQ(r.body["error"]["param"], param) << r.Describe();
  };
  expect({{"name", "x"}, {"checkpoint", checkpoint_}, {"max_replica", 2}}, 400, "max_replica");
  expect({{"name", "x"}, {"checkpoint", checkpoint_}, {"max_replicas", 0}}, 400, "max_replicas");
  expect({{"name", "x"}, {"checkpoint", checkpoint_}, {"max_replicas", 3}}, 400, "max_replicas");  // 2 slots
  expect({{"name", "x"}, {"checkpoint", checkpoint_}, {"min_replicas", 2}, {"max_replicas", 1}}, 400,
         "min_replicas");
  expect({{"name", "x"}}, 400, "checkpoint");
  expect({{"name", "bad name"}, {"checkpoint", checkpoint_}}, 400, "name");
  expect({{"name", "x"}, {"checkpoint", job_ + ":step-3"}}, 404, "checkpoint");
  expect({{"name", "x"}, {"checkpoint", checkpoint_}, {"scaledown_window_s", 0}}, 400, "scaledown_window_s");
  EXPECT_EQ(Send("GET", "/v1/deployments/nope").status, 404);
  EXPECT_EQ(Send("DELETE", "/v1/deployments/nope").status, 404);
  EXPECT_EQ(Send("GET", "/v1/deployments").body["data"].size(), 0u) << "nothing was created";
}

// An evaluation as a job of its own: the record names base model, adapter,
// checkpoint and the data's sha256; its metrics are what `burst eval` gives
// on the same checkpoint folder; its time is the "evaluation" usage line.
TEST_F(DeploymentsTest, EvalRunsAsAJobAndMatchesTheLocalEval) {
  WriteHead(SupportValid(), *dir_ / "valid.jsonl", 16);
  ProcResult remote = Burst(
      {"eval", "--remote", "--model", checkpoint_, "--data", (*dir_ / "valid.jsonl").string(), "--json"},
      120);
  ASSERT_TRUE(remote.ok()) << remote.Describe();
  Json e = Json::parse(remote.out, nullptr, false);
  ASSERT_TRUE(e.is_object()) << remote.out;
  EXPECT_EQ(e["object"], "eval");
  EXPECT_EQ(e["status"], "succeeded") << e.dump(1);
  EXPECT_EQ(e["checkpoint"], checkpoint_);
  EXPECT_EQ(e["adapter"], "lora");
  EXPECT_TRUE(Contains(e["base_model"].get<std::string>(), "burst-small")) << e.dump();
  EXPECT_EQ(e["dataset_sha256"], Sha256Hex(Slurp(*dir_ / "valid.jsonl")));
  const Json& m = e["metrics"];
  EXPECT_EQ(m["examples"], 16);
  EXPECT_GT(e["usage"]["cost"].get<double>(), 0.0);

  // The same evaluation, locally, on the checkpoint's folder in the store.
  const fs::path sampler = *dir_ / "data" / "store" / "objects" / "orgs" / org_ / "jobs" / job_ /
                           "checkpoints" / "step-00000004" / "sampler";
  ProcResult local = RunBurst({"eval", "--model", sampler.string(), "--data",
                               (*dir_ / "valid.jsonl").string(), "--json", "--threads", "1"});
  ASSERT_TRUE(local.ok()) << local.Describe();
  Json l = Json::parse(local.out);
  for (const char* k : {"eval_loss", "eval_token_acc", "eval_exact_match", "eval_label_acc"}) {
    ASSERT_TRUE(l.contains(k) && m.contains(k)) << k << ": " << l.dump() << " vs " << m.dump();
    if (l[k].is_number()) {
      EXPECT_NEAR(l[k].get<double>(), m[k].get<double>(), 1e-5) << k;
    }
  }
  EXPECT_EQ(l["data_sha256"], e["dataset_sha256"]);

  // The base model, no adapter; listed under /v1/evals, not among the jobs.
  Resp base = Send("POST", "/v1/evals", {{"model", "burst-small"}, {"file", e["file"]}});
  ASSERT_EQ(base.status, 200) << base.Describe();
  EXPECT_EQ(base.body["adapter"], "none");
  const std::string base_id = base.body["id"];
  Json b;
  ASSERT_TRUE(WaitUntil(
      [&] {
        b = Send("GET", "/v1/evals/" + base_id).body;
        return b.value("status", "") == "succeeded" || b.value("status", "") == "failed";
      },
      120, 100));
  EXPECT_EQ(b["status"], "succeeded") << b.dump(1);
  EXPECT_NE(b["metrics"]["eval_loss"], m["eval_loss"]) << "the adapter changes the model";
  Json evals = Send("GET", "/v1/evals").body;
  EXPECT_EQ(evals["data"].size(), 2u) << evals.dump();
  for (const Json& j : Send("GET", "/v1/fine_tuning/jobs").body["data"]) EXPECT_EQ(j["id"], job_);
  EXPECT_EQ(Send("GET", "/v1/fine_tuning/jobs/" + base_id).status, 404);
  // A segment reaches the ledger when its worker moves on (just after the
  // job's status does).
  double evaluation = 0;
  Json usage;
  WaitUntil(
      [&] {
        usage = Send("GET", "/v1/usage").body;
        evaluation = 0;
        for (const Json& u : usage["data"])
          if (u["line"] == "evaluation") evaluation += u["cost"].get<double>();
        return evaluation > 0;
      },
      5);
  EXPECT_GT(evaluation, 0.0) << usage.dump();

  // Bad requests name the field and create nothing.
  auto bad = [&](const Json& body, int status, const std::string& param) {
    Resp r = Send("POST", "/v1/evals", body);
    EXPECT_EQ(r.status, status) << body.dump() << " -> " << r.Describe();
    EXPECT_EQ(r.body["error"]["param"], param) << r.Describe();
  };
  bad({{"model", checkpoint_}}, 400, "file");
  bad({{"model", checkpoint_}, {"file", "file-nope"}}, 400, "file");
  bad({{"model", job_ + ":step-3"}, {"file", e["file"]}}, 404, "model");
  bad({{"model", checkpoint_}, {"file", e["file"]}, {"max_seq_lenn", 8}}, 400, "max_seq_lenn");
  EXPECT_EQ(Send("GET", "/v1/evals").body["data"].size(), 2u);
}

// The catalog, scopes, the estimate and the per-run budget lines (after the
// tests above, whose deployments and evaluations count to the run).
TEST_F(DeploymentsTest, CatalogScopesEstimateAndBudgetLines) {
  Json models = Send("GET", "/v1/models").body;
  Json small;
  for (const Json& m : models["data"])
    if (m["id"] == "burst-small") small = m;
  ASSERT_TRUE(small.is_object()) << models.dump();
  EXPECT_EQ(small["architecture"], "LlamaForCausalLM");
  EXPECT_EQ(small["max_seq_len"], 1024);
  EXPECT_EQ(small["parameters"], 4000000);
  EXPECT_EQ(small["lora_ranks"], Json({1, 2, 4, 8, 16, 32, 64}));
  EXPECT_EQ(small["serverless"], true);

  Json job = Send("GET", "/v1/fine_tuning/jobs/" + job_).body;
  EXPECT_EQ(job["scope"], "serverless") << job.dump();
  EXPECT_EQ(job["usage"]["tokens"], job["trained_tokens"]) << "serverless bills the trained tokens";
  EXPECT_NEAR(job["usage"]["cost"].get<double>(), job["trained_tokens"].get<double>() * 0.05 / 1e6, 1e-12)
      << "and only them (its worker time is recorded at cost 0)";

  // Checked against the catalog: the field and the allowed values.
  Json body = {
      {"model", "burst-small"},
      {"training_file", job["training_file"]},
      {"recipe", {{"max_steps", 4}, {"batch_size", 4}, {"max_seq_len", 128}, {"lora", {{"rank", 3}}}}}};
  Resp r = Send("POST", "/v1/fine_tuning/jobs", body);
  EXPECT_EQ(r.status, 400) << r.Describe();
  EXPECT_EQ(r.body["error"]["param"], "recipe.lora.rank");
  EXPECT_TRUE(Contains(r.raw, "[1,2,4,8,16,32,64]")) << r.raw;
  body["recipe"]["lora"]["rank"] = 4;
  body["recipe"]["max_seq_len"] = 4096;
  r = Send("POST", "/v1/fine_tuning/jobs", body);
  EXPECT_EQ(r.body["error"]["param"], "recipe.max_seq_len") << r.Describe();
  body["recipe"]["max_seq_len"] = 128;
  body["recipe"]["method"] = "full";
  body["recipe"].erase("lora");
  body["scope"] = "serverless";
  r = Send("POST", "/v1/fine_tuning/jobs", body);
  EXPECT_EQ(r.status, 400) << r.Describe();
  EXPECT_EQ(r.body["error"]["param"], "scope");
  EXPECT_TRUE(Contains(r.raw, "full fine-tunes run in dedicated scope only")) << r.raw;

  // The estimate: picked scope, measured throughput, nothing created.
  const size_t jobs_before = Send("GET", "/v1/fine_tuning/jobs").body["data"].size();
  body.erase("scope");
  Resp e = Send("POST", "/v1/fine_tuning/jobs/estimate", body);
  ASSERT_EQ(e.status, 200) << e.Describe();
  EXPECT_EQ(e.body["scope"], "dedicated");
  EXPECT_TRUE(Contains(e.body["scope_reason"], "picked")) << e.raw;
  EXPECT_EQ(e.body["total_steps"], 4);
  EXPECT_EQ(e.body["sequences"], 16);
  EXPECT_TRUE(Contains(e.body["tokens_per_second_source"], "measured: 1 finished job")) << e.raw;
  EXPECT_TRUE(Contains(e.body["tokens_per_sequence_source"], "measured")) << e.raw;
  // The fixture job fed 16 sequences of this file: the estimate is its count.
  EXPECT_EQ(e.body["tokens"], job["trained_tokens"]) << e.raw;
  EXPECT_NEAR(e.body["cost"].get<double>(), e.body["seconds"].get<double>() * 0.18 / 3600, 1e-12);
  EXPECT_EQ(Send("GET", "/v1/fine_tuning/jobs").body["data"].size(), jobs_before);
  body["recipe"]["lora"] = {{"rank", 3}};
  body["recipe"]["method"] = "lora";
  EXPECT_EQ(Send("POST", "/v1/fine_tuning/jobs/estimate", body).body["error"]["param"], "recipe.lora.rank");

  // Each run's three budget lines: the deployments and evaluations above
  // were of this job's checkpoint.
  Json usage = Send("GET", "/v1/usage").body;
  Json run;
  for (const Json& x : usage["runs"])
    if (x["run"] == job_) run = x;
  ASSERT_TRUE(run.is_object()) << usage.dump();
  EXPECT_GT(run["training_and_sampling"].get<double>(), 0.0);
  EXPECT_GT(run["evaluation"].get<double>(), 0.0);
  EXPECT_GT(run["deployment"].get<double>(), 0.0);
  EXPECT_NEAR(run["total"].get<double>(),
              run["training_and_sampling"].get<double>() + run["evaluation"].get<double>() +
                  run["deployment"].get<double>() + run["idle"].get<double>(),
              1e-12);
  ProcResult u = Burst({"usage"});
  ASSERT_TRUE(u.ok()) << u.Describe();
  EXPECT_TRUE(Contains(u.out, "by run")) << u.out;
  EXPECT_TRUE(std::regex_search(u.out, std::regex(job_ + " +[0-9.]+ +[0-9.]+ +[0-9.]+"))) << u.out;

  ProcResult est = Burst({"jobs", "create", "--model", "burst-small", "--training-file", job["training_file"],
                          "--recipe", (*dir_ / "r.json").string(), "--estimate"});
  EXPECT_FALSE(est.ok()) << "no such recipe file: " << est.Describe();
  WriteJsonFile(*dir_ / "r.json", {{"max_steps", 4}, {"batch_size", 4}, {"max_seq_len", 128}});
  est = Burst({"jobs", "create", "--model", "burst-small", "--training-file", job["training_file"],
               "--recipe", (*dir_ / "r.json").string(), "--estimate"});
  ASSERT_TRUE(est.ok()) << est.Describe();
  EXPECT_TRUE(Contains(est.out, "nothing was created")) << est.out;
  EXPECT_EQ(Send("GET", "/v1/fine_tuning/jobs").body["data"].size(), jobs_before);

  // The crossover: on demand vs a reserved machine of 3 slots at $0.10 an
  // hour crosses at 3 x 168 x 0.10 / 0.18 slot-hours, less the idle windows.
  ProcResult cross = Burst({"cost", "crossover", "--hours-per-week", "6", "--burst-size", "3",
                            "--reserved-per-hour", "0.10", "--tokens-per-second", "2000", "--json"});
  ASSERT_TRUE(cross.ok()) << cross.Describe();
  Json c = Json::parse(cross.out);
  EXPECT_NEAR(c["on_demand_crosses_reserved_at_hours"].get<double>(), 3 * 168 * 0.10 / 0.18 - 3 * 60.0 / 3600,
              1e-9);
  const double per_h = 3600 * 2000 / 1e6 * 0.05;
  EXPECT_NEAR(c["serverless_crosses_reserved_at_hours"].get<double>(), 3 * 168 * 0.10 / per_h, 1e-9);
  ProcResult table = Burst(
      {"cost", "crossover", "--hours-per-week", "6", "--burst-size", "3", "--reserved-per-hour", "0.10"});
  ASSERT_TRUE(table.ok()) << table.Describe();
  EXPECT_TRUE(Contains(table.out, "<- your pattern")) << table.out;
  EXPECT_TRUE(Contains(table.out, "measured on this server")) << table.out;
  EXPECT_TRUE(Contains(table.out, "on demand costs more than a reserved machine above")) << table.out;
}

// What an OpenAI client saw of the whole flow (openai_flow.mjs and .py print
// the same keys): the file, the job and its suffix, checkpoints newest
// first, events, models with the fine-tuned one, chat plain and streamed to
// the same answer, a 404 naming the model; and the same answer through
// Burst's own path (`direct`: the fine-tuned model called by name).
void ExpectWholeFlow(Json o, const Resp& direct) {
  EXPECT_EQ(o["file"]["object"], "file");
  EXPECT_EQ(o["created"]["object"], "fine_tuning.job");
  EXPECT_EQ(o["job"]["status"], "succeeded") << o.dump(1);
  const std::string model = o.value("job", Json::object()).value("fine_tuned_model", "");
  EXPECT_EQ(model, o.value("job", Json::object()).value("id", "") + ":openai-client:step-4")
      << "the suffix is in the name";
  ASSERT_EQ(o["checkpoints"].size(), 2u) << o.dump(1);
  EXPECT_EQ(o["checkpoints"][0]["step_number"], 4) << "newest first";
  EXPECT_EQ(o["checkpoints"][0]["fine_tuned_model_checkpoint"], model);
  EXPECT_GT(o["events"].get<int64_t>(), 4);
  EXPECT_EQ(o["last_event"], "The job has successfully completed");
  EXPECT_NE(std::find(o["models"].begin(), o["models"].end(), Json("burst-small")), o["models"].end());
  // The client's models.list() shows the fine-tuned checkpoint too.
  EXPECT_NE(std::find(o["models"].begin(), o["models"].end(), Json(model)), o["models"].end()) << o["models"];
  EXPECT_EQ(o["chat"]["object"], "chat.completion");
  EXPECT_GT(o["chat"]["usage"]["prompt_tokens"].get<int64_t>(), 0);
  EXPECT_EQ(o["stream"]["content"], o["chat"]["content"]) << "streamed deltas add up to the same answer";
  EXPECT_GT(o["stream"]["chunks"].get<int64_t>(), 1);
  EXPECT_EQ(o["missing"]["status"], 404) << o.dump(1);
  EXPECT_EQ(o["missing"]["param"], "model");
  ASSERT_EQ(direct.status, 200) << direct.Describe();
  EXPECT_EQ(direct.body["choices"][0]["message"]["content"], o["chat"]["content"]);
}

// Runs a client flow script against this server; its JSON.
Json RunFlow(int port, const std::string& key, const std::vector<std::string>& args) {
  return RunOpenAIClient("http://127.0.0.1:" + std::to_string(port) + "/v1", key, args, 180);
}

// The official OpenAI client (npm `openai`, tests/reference) against Burst.
TEST_F(DeploymentsTest, TheOpenAIClientRunsTheWholeFlow) {
  const fs::path ref = SourceDir() / "tests/reference";
  if (!fs::exists(ref / "node_modules/openai") || std::system("node --version >/dev/null 2>&1") != 0) {
    GTEST_SKIP() << "the openai npm package is not installed (scripts/install-npm-deps.sh)";
  }
  Json o =
      RunFlow(port_, key_,
              {"/usr/bin/env", "node", (ref / "openai_flow.mjs").string(), (*dir_ / "train.jsonl").string()});
  ExpectWholeFlow(o, Chat(o.value("job", Json::object()).value("fine_tuned_model", "")));
}

// OpenAI's Python SDK through the same flow, with the usage a stream ends
// with (stream_options.include_usage), and LangChain's ChatOpenAI (Python)
// on the model it trained: the same answer, invoked and streamed.
TEST_F(DeploymentsTest, TheOpenAIPythonClientAndLangChainRunTheWholeFlow) {
  Json o = RunFlow(port_, key_,
                   {BURST_PYTHON, (SourceDir() / "tests/reference/openai_flow.py").string(),
                    (*dir_ / "train.jsonl").string()});
  ExpectWholeFlow(o, Chat(o.value("job", Json::object()).value("fine_tuned_model", "")));
  Json& usage = o["stream"]["usage"];
  ASSERT_TRUE(usage.is_object()) << o["stream"].dump();
  EXPECT_EQ(usage["prompt_tokens"], o["chat"]["usage"]["prompt_tokens"]);
  EXPECT_EQ(usage["completion_tokens"], o["chat"]["usage"]["completion_tokens"]);
  Json& lc = o["langchain"];
  EXPECT_EQ(lc["content"], o["chat"]["content"]) << lc.dump();
  EXPECT_EQ(lc["stream"], o["chat"]["content"]) << lc.dump();
  EXPECT_EQ(lc["usage"]["input_tokens"], o["chat"]["usage"]["prompt_tokens"]) << lc.dump();
  ASSERT_TRUE(lc["stream_usage"].is_object()) << lc.dump();
  EXPECT_EQ(lc["stream_usage"]["output_tokens"], o["chat"]["usage"]["completion_tokens"]) << lc.dump();
}

}  // namespace
}  // namespace burst::e2e
