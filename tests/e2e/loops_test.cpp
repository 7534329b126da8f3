// End-to-end tests of training loops as a service: a real `burst serve`
// and real `burst worker`s spoken to over the tinker SDK's wire protocol
// (/api/v1, "X-API-Key: tml-<key>", futures polled with retrieve_future),
// in the bodies the SDK's JSON variant sends (docs/tinker-protocol.md).
#include <gtest/gtest.h>
#include <httplib.h>
#include <signal.h>

#include <cmath>
#include <cstring>
#include <fstream>

#include "e2e_loops.h"

namespace burst::e2e {
namespace {

class LoopsTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    server_ = new ServeProcess("burst-e2e-loops",
                               {"--slots", "1", "--threads-per-slot", "1", "--scaledown-window", "60"});
    if (!server_->error().empty()) start_error_ = server_->error();
  }
  static void TearDownTestSuite() {
    delete server_;
    server_ = nullptr;
  }
  void SetUp() override {
    if (!start_error_.empty()) GTEST_SKIP() << start_error_;
  }

  // The calls of e2e_loops.h on this suite's server.
  static Resp Post(const std::string& path, const Json& body) { return TinkerPost(*server_, path, body); }
  static Json Result(const Resp& submitted) { return TinkerResult(*server_, submitted); }
  static Json ResultWithTiming(const Resp& submitted) { return TinkerResultWithTiming(*server_, submitted); }
  static std::string Session() { return TinkerSession(*server_); }
  static std::string Model(const std::string& session, int64_t seq, int64_t seed) {
    return TinkerModel(*server_, session, seq, seed);
  }
  static Json Datum(const std::vector<int64_t>& seq, bool weighted_tail = true) {
    return TinkerDatum(seq, weighted_tail);
  }
  static Resp ForwardBackward(const std::string& model, int64_t seq_id, const Json& data,
                              bool forward_only = false) {
    return TinkerForwardBackward(*server_, model, seq_id, data, forward_only);
  }
  static Resp OptimStep(const std::string& model, int64_t seq_id, double lr) {
    return TinkerOptimStep(*server_, model, seq_id, lr);
  }

  static ServeProcess* server_;
  static std::string start_error_;
};

ServeProcess* LoopsTest::server_ = nullptr;
std::string LoopsTest::start_error_;

const std::vector<int64_t> kSeqA = {5, 17, 42, 9, 100, 7, 7, 300, 12, 44, 45, 46, 2};
const std::vector<int64_t> kSeqB = {8, 9, 10, 11, 12, 13, 14, 15};

TEST_F(LoopsTest, TrainsSavesAndSamplesThroughTheTinkerProtocol) {
  Resp config = Post("/api/v1/client/config", {{"sdk_version", "0.24.1"}});
  ASSERT_EQ(config.status, 200) << config.Describe();
  const std::string session = Session();
  ASSERT_FALSE(session.empty());
  EXPECT_EQ(
      Post("/api/v1/session_heartbeat", {{"session_id", session}, {"type", "session_heartbeat"}}).status,
      200);
  const std::string model = Model(session, 0, 1);
  ASSERT_FALSE(model.empty());
  const Json data = Json::array({Datum(kSeqA), Datum(kSeqB)});
  std::vector<double> losses;
  int64_t seq = 1;
  for (int step = 0; step < 3; ++step) {
    Resp fb = ForwardBackward(model, seq++, data);
    Resp opt = OptimStep(model, seq++, 2e-3);  // submitted before fb's result, as the SDK pipelines them
    Json fr = Result(fb), or_ = ResultWithTiming(opt);
    EXPECT_GT(or_["burst"]["compute_ms"].get<double>(), 0.0) << or_.dump();
    EXPECT_GE(or_["burst"]["request_to_result_ms"].get<double>(),
              or_["burst"]["compute_ms"].get<double>() - 1);
    ASSERT_TRUE(fr.contains("metrics")) << fr.dump();
    losses.push_back(fr["metrics"]["loss:sum"].get<double>());
    ASSERT_EQ(fr["loss_fn_outputs"].size(), 2u);
    EXPECT_EQ(fr["loss_fn_outputs"][0]["logprobs"]["data"].size(), kSeqA.size() - 1);
    EXPECT_EQ(fr["loss_fn_outputs"][0]["logprobs"]["dtype"], "float32");
    EXPECT_EQ(or_["metrics"]["step"], step + 1) << or_.dump();
  }
  EXPECT_LT(losses[2], losses[0]) << "three optim_steps on the same batch must lower its loss";

  Json saved = Result(
      Post("/api/v1/save_weights_for_sampler",
           {{"model_id", model}, {"path", "s1"}, {"seq_id", seq++}, {"type", "save_weights_for_sampler"}}));
  ASSERT_EQ(saved.value("path", ""), "tinker://" + model + "/sampler_weights/s1") << saved.dump();
  Resp sampler = Post("/api/v1/create_sampling_session", {{"session_id", session},
                                                          {"sampling_session_seq_id", 0},
                                                          {"model_path", saved["path"]},
                                                          {"type", "create_sampling_session"}});
  ASSERT_EQ(sampler.status, 200) << sampler.Describe();
  const std::vector<int64_t> prompt = {5, 17, 42, 9};
  Json smp =
      Result(Post("/api/v1/asample",
                  {{"num_samples", 2},
                   {"prompt", {{"chunks", {{{"tokens", prompt}, {"type", "encoded_text"}}}}}},
                   {"sampling_params",
                    {{"max_tokens", 6}, {"seed", 3}, {"temperature", 1.0}, {"top_k", -1}, {"top_p", 1.0}}},
                   {"sampling_session_id", sampler.body["sampling_session_id"]},
                   {"seq_id", 0},
                   {"prompt_logprobs", true},
                   {"topk_prompt_logprobs", 0},
                   {"type", "sample"}}));
  ASSERT_EQ(smp["sequences"].size(), 2u) << smp.dump();
  const Json& s0 = smp["sequences"][0];
  ASSERT_FALSE(s0["tokens"].empty());
  EXPECT_LE(s0["tokens"].size(), 6u);
  ASSERT_EQ(smp["prompt_logprobs"].size(), prompt.size());
  EXPECT_TRUE(smp["prompt_logprobs"][0].is_null());

  // Sampler weights are ordinary checkpoints: completions and deployments take them.
  Resp completion = server_->Send("POST", "/v1/completions",
                                  {{"model", saved["path"]},
                                   {"prompt", "Ticket: my card was charged twice"},
                                   {"max_tokens", 4},
                                   {"seed", 1}});
  EXPECT_EQ(completion.status, 200) << completion.Describe();
  Resp dep = server_->Send(
      "POST", "/v1/deployments",
      {{"name", "loop-s1"}, {"checkpoint", saved["path"]}, {"min_replicas", 0}, {"max_replicas", 1}});
  EXPECT_EQ(dep.status, 200) << dep.Describe();
  if (dep.status == 200) {
    EXPECT_EQ(server_->Send("DELETE", "/v1/deployments/loop-s1").status, 200);
  }

  // The sampler's logprobs are the trainer's: forward on prompt + sample, same weights.
  std::vector<int64_t> full = prompt;
  for (const Json& t : s0["tokens"]) full.push_back(t.get<int64_t>());
  Json fwd = Result(ForwardBackward(model, seq++, Json::array({Datum(full, false)}), /*forward_only=*/true));
  const Json& lp = fwd["loss_fn_outputs"][0]["logprobs"]["data"];
  for (size_t k = 0; k < s0["tokens"].size(); ++k) {
    EXPECT_NEAR(lp[prompt.size() - 1 + k].get<double>(), s0["logprobs"][k].get<double>(), 1e-4)
        << "token " << k;
  }
  for (size_t i = 1; i < prompt.size(); ++i) {
    EXPECT_NEAR(lp[i - 1].get<double>(), smp["prompt_logprobs"][i].get<double>(), 1e-4)
        << "prompt token " << i;
  }
}

// A loop's concurrent sample requests (an RL step's groups) decode in one
// batch on the worker, each answering what it answers alone; prompt and
// top-k prompt logprobs come from the same prefill.
TEST_F(LoopsTest, ConcurrentSampleRequestsDecodeInOneBatch) {
  const std::string session = Session();
  Resp sampler = Post("/api/v1/create_sampling_session", {{"session_id", session},
                                                          {"sampling_session_seq_id", 0},
                                                          {"base_model", "burst-small"},
                                                          {"type", "create_sampling_session"}});
  ASSERT_EQ(sampler.status, 200) << sampler.Describe();
  auto body = [&](int64_t k) {
    const std::vector<int64_t> prompt = {5 + k, 17, 42 + k, 9, 3 * k + 1};
    return Json{{"num_samples", 1 + k % 3},
                {"prompt", {{"chunks", {{{"tokens", prompt}, {"type", "encoded_text"}}}}}},
                {"sampling_params", {{"max_tokens", 24}, {"seed", 10 + k}, {"temperature", 1.0}}},
                {"sampling_session_id", sampler.body["sampling_session_id"]},
                {"seq_id", k},
                {"prompt_logprobs", k % 2 == 0},
                {"topk_prompt_logprobs", k % 2 == 0 ? 3 : 0},
                {"type", "sample"}};
  };
  constexpr int64_t kCalls = 6;
  std::vector<Resp> sent;
  for (int64_t k = 0; k < kCalls; ++k) sent.push_back(Post("/api/v1/asample", body(k)));  // all out first
  int64_t peak = 0;
  std::vector<Json> together;
  for (const Resp& r : sent) {
    Json got = ResultWithTiming(r);
    peak = std::max(peak, got["burst"].value("batch_peak", int64_t{0}));
    got.erase("burst");
    together.push_back(got);
  }
  EXPECT_GE(peak, 2) << "six requests sent at once, one worker: some decoded together";
  for (int64_t k = 0; k < kCalls; ++k) {
    SCOPED_TRACE("request " + std::to_string(k));
    const Json& got = together[static_cast<size_t>(k)];
    Json alone = Result(Post("/api/v1/asample", body(k)));
    ASSERT_EQ(got["sequences"].size(), static_cast<size_t>(1 + k % 3)) << got.dump();
    ASSERT_EQ(alone["sequences"].size(), got["sequences"].size());
    for (size_t i = 0; i < got["sequences"].size(); ++i) {
      EXPECT_EQ(got["sequences"][i]["tokens"], alone["sequences"][i]["tokens"]) << "sample " << i;
    }
    if (k % 2 == 1) {
      EXPECT_TRUE(got["prompt_logprobs"].is_null()) << got.dump();
      continue;
    }
    const Json& plp = got["prompt_logprobs"];
    const Json& topk = got["topk_prompt_logprobs"];
    ASSERT_EQ(plp.size(), 5u) << got.dump();
    ASSERT_EQ(topk.size(), 5u) << got.dump();
    EXPECT_TRUE(plp[0].is_null() && topk[0].is_null());
    for (size_t i = 1; i < 5; ++i) {
      EXPECT_NEAR(plp[i].get<double>(), alone["prompt_logprobs"][i].get<double>(), 1e-4);
      ASSERT_EQ(topk[i].size(), 3u);
      const double best = topk[i][0][1].get<double>();
      EXPECT_LE(plp[i].get<double>(), best + 1e-6) << "no token beats the likeliest";
      EXPECT_GE(best, topk[i][1][1].get<double>());
      EXPECT_GE(topk[i][1][1].get<double>(), topk[i][2][1].get<double>());
    }
  }
}

TEST_F(LoopsTest, ARetriedRequestIsAppliedOnceAndOrderIsBySeqId) {
  const std::string model = Model(Session(), 0, 2);
  ASSERT_FALSE(model.empty());
  // seq 2 arrives first: it waits for seq 1.
  Resp opt = OptimStep(model, 2, 1e-2);
  Resp again = OptimStep(model, 2, 1e-2);  // the SDK's retry of the same POST
  ASSERT_EQ(opt.status, 200) << opt.Describe();
  EXPECT_EQ(again.body["request_id"], opt.body["request_id"]);
  Resp fb = ForwardBackward(model, 1, Json::array({Datum(kSeqA)}));
  Json o = Result(opt);
  EXPECT_EQ(o["metrics"]["step"], 1) << o.dump();
  EXPECT_GT(o["metrics"]["grad_norm"].get<double>(), 0.0) << "the optim_step ran after seq 1's gradients";
  EXPECT_TRUE(Result(fb).contains("loss_fn_outputs"));
  // create_model retried without a seed: the same run (the seed is the request's, not random per call).
  const std::string session = Session();
  const Json body = {{"session_id", session},
                     {"model_seq_id", 0},
                     {"base_model", "burst-small"},
                     {"lora_config", {{"rank", 8}}},
                     {"type", "create_model"}};
  Json first = Result(Post("/api/v1/create_model", body)),
       second = Result(Post("/api/v1/create_model", body));
  EXPECT_EQ(first.value("model_id", "a"), second.value("model_id", "b")) << second.dump();
}

TEST_F(LoopsTest, BadRequestsAreRefusedNamingTheFieldAndCreateNothing) {
  const std::string model = Model(Session(), 0, 3);
  Resp bad = ForwardBackward(model, 1, Json::array({Datum({1, 2, 99999})}));
  EXPECT_EQ(bad.status, 400) << bad.Describe();
  EXPECT_NE(bad.raw.find("target_tokens"), std::string::npos) << bad.raw;
  EXPECT_NE(bad.raw.find("vocabulary"), std::string::npos) << bad.raw;
  Resp none = OptimStep("sess-nope-train-0", 1, 1e-3);
  EXPECT_EQ(none.status, 404) << none.Describe();
  Resp rank = Post("/api/v1/create_model", {{"session_id", Session()},
                                            {"model_seq_id", 0},
                                            {"base_model", "burst-small"},
                                            {"lora_config", {{"rank", 3}}},
                                            {"type", "create_model"}});
  EXPECT_EQ(rank.status, 400) << rank.Describe();
  EXPECT_NE(rank.raw.find("lora_config.rank"), std::string::npos) << rank.raw;
  // seq 1 was refused, so it is still free: the run's first request works.
  Json ok = Result(ForwardBackward(model, 1, Json::array({Datum(kSeqB)})));
  EXPECT_TRUE(ok.contains("loss_fn_outputs")) << ok.dump();
  // A request that fails on the worker (no such saved state) is a failed
  // future naming why; the run and the server go on.
  Json missing = Result(Post("/api/v1/load_weights", {{"model_id", model},
                                                      {"seq_id", 2},
                                                      {"path", "tinker://" + model + "/weights/never-saved"},
                                                      {"type", "load_weights"}}));
  EXPECT_EQ(missing.value("category", ""), "user") << missing.dump();
  EXPECT_NE(missing.value("error", "").find("never-saved"), std::string::npos) << missing.dump();
  Json after = Result(OptimStep(model, 3, 1e-3));
  EXPECT_EQ(after["metrics"]["step"], 1) << after.dump();
  // A key without the tml- prefix is the same key too; no key is 401.
  httplib::Client c("127.0.0.1", server_->port());
  auto r = c.Post("/api/v1/create_session", "{}", "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 401);
}

// A worker killed between requests: the next worker restores the run from
// the requests the control plane kept, and every result equals an
// undisturbed run's bit for bit.
TEST_F(LoopsTest, AKilledWorkerIsReplacedAndLaterResultsAreBitIdentical) {
  const std::string session = Session();
  const std::string calm = Model(session, 0, 7), hit = Model(session, 1, 7);
  ASSERT_FALSE(calm.empty());
  const Json data = Json::array({Datum(kSeqA), Datum(kSeqB)});
  auto step = [&](const std::string& m, int64_t s) {
    Json fb = Result(ForwardBackward(m, 2 * s + 1, data));
    Result(OptimStep(m, 2 * s + 2, 1e-2));
    return fb;
  };
  std::vector<Json> undisturbed;
  for (int64_t s = 0; s < 4; ++s) undisturbed.push_back(step(calm, s));
  for (int64_t s = 0; s < 2; ++s) EXPECT_EQ(step(hit, s), undisturbed[s]) << "step " << s;
  // Kill the worker that holds the run.
  Resp workers = server_->Send("GET", "/v1/workers");
  ASSERT_EQ(workers.status, 200) << workers.Describe();
  int killed = 0;
  for (const Json& w : workers.body["data"]) {
    if (w.value("pid", Json()).is_number_integer()) killed += ::kill(w["pid"].get<int>(), SIGKILL) == 0;
  }
  ASSERT_GE(killed, 1) << workers.raw;
  for (int64_t s = 2; s < 4; ++s) {
    Json a = step(hit, s);
    ASSERT_TRUE(a.contains("loss_fn_outputs")) << a.dump();
    EXPECT_EQ(a, undisturbed[s]) << "step " << s << " after the worker was killed";
  }
}

// SIGKILLs every live worker once one of them is busy (running a call); the
// number killed.
int KillBusyWorkers(ServeProcess& server, double wait_s) {
  int killed = 0;
  WaitUntil(
      [&] {
        Resp w = server.Send("GET", "/v1/workers");
        bool busy = false;
        for (const Json& x : w.body.value("data", Json::array())) busy |= x.value("state", "") == "busy";
        if (!busy) return false;
        for (const Json& x : w.body["data"]) {
          if (x.value("pid", Json()).is_number_integer()) killed += ::kill(x["pid"].get<int>(), SIGKILL) == 0;
        }
        return true;
      },
      wait_s, 10);
  return killed;
}

// Workers killed while a forward_backward runs and right after an
// optim_step is sent: the request is run again on a new worker after the
// run is restored, and its result is the undisturbed run's, bit for bit.
TEST_F(LoopsTest, AWorkerKilledDuringARequestChangesNoResult) {
  const std::string session = Session();
  const std::string calm = Model(session, 0, 9), hit = Model(session, 1, 9);
  // A batch that takes a while on one thread, so the kill lands during it.
  Json big = Json::array();
  for (int d = 0; d < 24; ++d) {
    std::vector<int64_t> seq;
    for (int t = 0; t < 160; ++t) seq.push_back((d * 37 + t * 11) % 900 + 3);
    big.push_back(Datum(seq, false));
  }
  std::vector<Json> undisturbed;
  for (int64_t s = 0; s < 2; ++s) {
    undisturbed.push_back(Result(ForwardBackward(calm, 2 * s + 1, big)));
    undisturbed.push_back(Result(OptimStep(calm, 2 * s + 2, 1e-3)));
  }
  // During forward_backward.
  Resp fb = ForwardBackward(hit, 1, big);
  EXPECT_GE(KillBusyWorkers(*server_, 60), 1) << "no worker was seen running the request";
  Json got = Result(fb);
  ASSERT_TRUE(got.contains("loss_fn_outputs")) << got.dump().substr(0, 300);
  EXPECT_EQ(got, undisturbed[0]) << "forward_backward rerun after its worker was killed";
  // Right after optim_step is sent (before or while it runs).
  Resp opt = OptimStep(hit, 2, 1e-3);
  Resp workers = server_->Send("GET", "/v1/workers");
  for (const Json& x : workers.body.value("data", Json::array())) {
    if (x.value("pid", Json()).is_number_integer()) ::kill(x["pid"].get<int>(), SIGKILL);
  }
  EXPECT_EQ(Result(opt), undisturbed[1]);
  EXPECT_EQ(Result(ForwardBackward(hit, 3, big)), undisturbed[2]) << "the step after the kills";
  EXPECT_EQ(Result(OptimStep(hit, 4, 1e-3)), undisturbed[3]);
}

// Training runs and checkpoints over the SDK's REST calls: list, get, the
// archive (a tar of the adapter), TTL, delete; a name that exists is refused.
TEST_F(LoopsTest, ListsArchivesExpiresAndDeletesCheckpoints) {
  const std::string session = Session();
  const std::string model = Model(session, 0, 4);
  Result(ForwardBackward(model, 1, Json::array({Datum(kSeqA)})));
  Result(OptimStep(model, 2, 1e-3));
  Json state = Result(Post(
      "/api/v1/save_weights",
      {{"model_id", model}, {"path", "c1"}, {"seq_id", 3}, {"overwrite", false}, {"type", "save_weights"}}));
  EXPECT_EQ(state.value("path", ""), "tinker://" + model + "/weights/c1") << state.dump();
  Result(Post("/api/v1/save_weights_for_sampler",
              {{"model_id", model}, {"path", "s1"}, {"seq_id", 4}, {"type", "save_weights_for_sampler"}}));
  Resp again = Post(
      "/api/v1/save_weights",
      {{"model_id", model}, {"path", "c1"}, {"seq_id", 5}, {"overwrite", false}, {"type", "save_weights"}});
  EXPECT_EQ(again.status, 400) << again.Describe();
  // load_state_with_optimizer on another run (same LoRA shape): the next step equals this run's next step.
  const std::string other = Model(session, 1, 99);
  Json loaded = Result(Post("/api/v1/load_weights", {{"model_id", other},
                                                     {"seq_id", 1},
                                                     {"path", state["path"]},
                                                     {"optimizer", true},
                                                     {"type", "load_weights"}}));
  EXPECT_FALSE(loaded.contains("error")) << loaded.dump();
  Json next_a = Result(ForwardBackward(model, 5, Json::array({Datum(kSeqB)})));
  Json next_b = Result(ForwardBackward(other, 2, Json::array({Datum(kSeqB)})));
  EXPECT_EQ(next_a, next_b) << "the loaded state is the saved one";
  EXPECT_EQ(Result(OptimStep(model, 6, 1e-3)), Result(OptimStep(other, 3, 1e-3)))
      << "moments and step came along";
  httplib::Client c("127.0.0.1", server_->port());
  const httplib::Headers key = {{"X-API-Key", "tml-" + server_->key()}, {"accept", "application/json"}};
  auto get = [&](const std::string& path) {
    auto r = c.Get(path, key);
    return r ? Json::parse(r->body, nullptr, false) : Json();
  };
  Json runs = get("/api/v1/training_runs?limit=100&offset=0&access_scope=owned");
  bool listed = false;
  for (const Json& r : runs["training_runs"]) listed |= r["training_run_id"] == model;
  EXPECT_TRUE(listed) << runs.dump().substr(0, 500);
  EXPECT_GE(runs["cursor"]["total_count"].get<int64_t>(), 1);
  Json run = get("/api/v1/training_runs/" + model);
  EXPECT_EQ(run["last_checkpoint"]["tinker_path"], "tinker://" + model + "/weights/c1") << run.dump();
  EXPECT_EQ(run["last_sampler_checkpoint"]["checkpoint_id"], "sampler_weights/s1");
  EXPECT_EQ(run["lora_rank"], 8);
  Json cps = get("/api/v1/training_runs/" + model + "/checkpoints");
  ASSERT_EQ(cps["checkpoints"].size(), 2u) << cps.dump();
  Json all = get("/api/v1/checkpoints?limit=100&offset=0");
  EXPECT_GE(all["cursor"]["total_count"].get<int64_t>(), 2) << all.dump().substr(0, 300);
  Json info = Post("/api/v1/weights_info", {{"tinker_path", state["path"]}}).body;
  EXPECT_EQ(info["base_model"], "burst-small") << info.dump();
  EXPECT_EQ(info["lora_rank"], 8);
  EXPECT_EQ(info["is_lora"], true);
  Json sessions = get("/api/v1/sessions");
  bool has = false;
  for (const Json& s : sessions["sessions"]) has |= s == session;
  EXPECT_TRUE(has) << sessions.dump().substr(0, 300);
  Json contents = get("/api/v1/sessions/" + session);
  EXPECT_EQ(contents["training_run_ids"].size(), 2u) << contents.dump();
  EXPECT_GT(cps["checkpoints"][1]["size_bytes"].get<int64_t>(), 0);
  // The archive: a tar holding the PEFT adapter.
  Json link = get("/api/v1/training_runs/" + model + "/checkpoints/sampler_weights/s1/archive");
  ASSERT_TRUE(link["url"].is_string()) << link.dump();
  const std::string url = link["url"];
  const std::string path = url.substr(url.find("/api/v1/archives/"));
  auto tar = httplib::Client("127.0.0.1", server_->port()).Get(path);  // the link needs no key
  ASSERT_TRUE(tar);
  ASSERT_EQ(tar->status, 200);
  EXPECT_NE(tar->body.find("adapter_model.safetensors"), std::string::npos);
  EXPECT_NE(tar->body.find("adapter_config.json"), std::string::npos);
  EXPECT_NE(tar->body.find("ustar"), std::string::npos);
  EXPECT_EQ(tar->body.size() % 512, 0u);
  {  // GNU tar reads it
    const fs::path file = server_->dir() / "s1.tar";
    std::ofstream(file, std::ios::binary) << tar->body;
    ProcResult listed_files = Process({"/usr/bin/tar", "-tf", file.string()}).Wait(30);
    EXPECT_EQ(listed_files.exit_code, 0) << listed_files.Describe();
    EXPECT_NE(listed_files.out.find("adapter_model.safetensors"), std::string::npos) << listed_files.out;
  }
  // TTL: set, shown, cleared; delete removes it.
  auto ttl = c.Put("/api/v1/training_runs/" + model + "/checkpoints/weights/c1/ttl", key,
                   R"({"ttl_seconds": 3600})", "application/json");
  ASSERT_TRUE(ttl);
  EXPECT_EQ(ttl->status, 200) << ttl->body;
  EXPECT_TRUE(
      get("/api/v1/training_runs/" + model + "/checkpoints")["checkpoints"][0]["expires_at"].is_string());
  auto bad = c.Put("/api/v1/training_runs/" + model + "/checkpoints/weights/c1/ttl", key,
                   R"({"ttl_seconds": 0})", "application/json");
  EXPECT_EQ(bad->status, 400);
  auto del = c.Delete("/api/v1/training_runs/" + model + "/checkpoints/weights/c1", key);
  ASSERT_TRUE(del);
  EXPECT_EQ(del->status, 200) << del->body;
  EXPECT_EQ(get("/api/v1/training_runs/" + model + "/checkpoints")["checkpoints"].size(), 1u);
  auto gone = c.Delete("/api/v1/training_runs/" + model + "/checkpoints/weights/c1", key);
  EXPECT_EQ(gone->status, 404);
}

// A run idle past the scaledown window is parked: its worker writes a
// restore point before it leaves, and the next request restores from it
// without replaying, to the same bits as a run that never left its worker.
TEST_F(LoopsTest, AnIdleRunIsParkedInTheStoreAndRestoredFromIt) {
  const Json data = Json::array({Datum(kSeqA), Datum(kSeqB)});
  auto steps = [&](auto& post, const std::string& model, int64_t from, int64_t n) {
    std::vector<Json> out;
    for (int64_t s = from; s < from + n; ++s) {
      out.push_back(Result(post("/api/v1/forward_backward",
                                {{"forward_backward_input", {{"data", data}, {"loss_fn", "cross_entropy"}}},
                                 {"model_id", model},
                                 {"seq_id", 2 * s + 1}})));
      out.push_back(Result(
          post("/api/v1/optim_step",
               {{"adam_params", {{"learning_rate", 1e-3}}}, {"model_id", model}, {"seq_id", 2 * s + 2}})));
    }
    return out;
  };
  // Undisturbed, on the suite's server (its window outlasts the test).
  auto post_main = [](const std::string& path, const Json& body) { return Post(path, body); };
  const std::vector<Json> want = steps(post_main, Model(Session(), 0, 21), 0, 3);

  ServeProcess quick("burst-e2e-loops-park",
                     {"--slots", "1", "--threads-per-slot", "1", "--scaledown-window", "1"});
  ASSERT_TRUE(quick.error().empty()) << quick.error();
  auto post = [&](const std::string& path, const Json& body) {
    httplib::Client c("127.0.0.1", quick.port());
    c.set_read_timeout(60, 0);
    auto r = c.Post(path, {{"X-API-Key", "tml-" + quick.key()}}, body.dump(), "application/json");
    Resp out;
    if (r) {
      out.status = r->status;
      out.raw = r->body;
      out.body = Json::parse(r->body, nullptr, false);
    }
    return out;
  };
  auto result = [&](const Resp& submitted) {
    for (int i = 0; i < 20; ++i) {
      Resp r = post("/api/v1/retrieve_future", {{"request_id", submitted.body.value("request_id", "")}});
      if (r.body.value("type", "") != "try_again") {
        if (r.body.is_object()) r.body.erase("burst");
        return r.body;
      }
    }
    return Json();
  };
  Resp session = post("/api/v1/create_session", {{"tags", Json::array()}, {"user_metadata", Json::object()}});
  const std::string sid = session.body.value("session_id", "");
  const std::string model =
      result(post("/api/v1/create_model", {{"session_id", sid},
                                           {"model_seq_id", 0},
                                           {"base_model", "burst-small"},
                                           {"lora_config", {{"rank", 8}, {"seed", 21}}}}))
          .value("model_id", "");
  ASSERT_FALSE(model.empty());
  std::vector<Json> got;
  auto run_steps = [&](int64_t from, int64_t n) {
    for (int64_t s = from; s < from + n; ++s) {
      got.push_back(result(post("/api/v1/forward_backward",
                                {{"forward_backward_input", {{"data", data}, {"loss_fn", "cross_entropy"}}},
                                 {"model_id", model},
                                 {"seq_id", 2 * s + 1}})));
      got.push_back(result(
          post("/api/v1/optim_step",
               {{"adam_params", {{"learning_rate", 1e-3}}}, {"model_id", model}, {"seq_id", 2 * s + 2}})));
    }
  };
  run_steps(0, 2);
  // The worker leaves after its window; the run is parked.
  ASSERT_TRUE(WaitUntil(
      [&] { return quick.Send("GET", "/v1/workers").body.value("data", Json::array()).empty(); }, 60))
      << "the worker did not scale down";
  httplib::Client c("127.0.0.1", quick.port());
  auto stats = [&] {
    auto r = c.Get("/api/v1/training_runs/" + model, {{"X-API-Key", "tml-" + quick.key()}});
    return r ? Json::parse(r->body, nullptr, false).value("burst", Json()) : Json();
  };
  Json parked = stats();
  EXPECT_EQ(parked["version"], 4) << parked.dump();
  EXPECT_EQ(parked["requests_kept_for_replay"], 0) << "parked: nothing left to replay";
  run_steps(2, 1);
  Json after = stats();
  EXPECT_EQ(after["restores"], 1) << after.dump();
  EXPECT_GE(after["cold_starts"].get<int64_t>(), 2)
      << "the first request and the one after parking started workers";
  EXPECT_GT(after["cost"].get<double>(), 0.0);
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) EXPECT_EQ(got[i], want[i]) << "request " << i;
}

// A protobuf message's top-level fields: (number, wire type, bytes or varint).
struct PbField {
  uint32_t number = 0;
  int type = 0;
  std::string bytes;
  uint64_t varint = 0;
};
std::vector<PbField> PbFields(const std::string& b) {
  std::vector<PbField> out;
  size_t i = 0;
  auto varint = [&] {
    uint64_t v = 0;
    for (int shift = 0; i < b.size(); shift += 7) {
      const uint8_t c = static_cast<uint8_t>(b[i++]);
      v |= static_cast<uint64_t>(c & 0x7f) << shift;
      if (!(c & 0x80)) break;
    }
    return v;
  };
  while (i < b.size()) {
    PbField f;
    const uint64_t tag = varint();
    f.number = static_cast<uint32_t>(tag >> 3);
    f.type = static_cast<int>(tag & 7);
    if (f.type == 0)
      f.varint = varint();
    else if (f.type == 1)
      f.bytes = b.substr(i, 8), i += 8;
    else if (f.type == 2) {
      const uint64_t n = varint();
      f.bytes = b.substr(i, n);
      i += n;
    } else
      break;
    out.push_back(f);
  }
  return out;
}

// What SDK 0.25.0 sends: forward_backward as protobuf (the SDK's own bytes,
// tests/fixtures/tinker, with this run's model_id), and results asked for
// as protobuf; the logprobs equal the JSON variant's on the same datum.
TEST_F(LoopsTest, SpeaksTheProtobufOfSdk025) {
  const std::string session = Session();
  const std::string model = Model(session, 0, 5), twin = Model(session, 1, 5);
  std::string sdk = Slurp(SourceDir() / "tests/fixtures/tinker/fwdbwd_cross_entropy.pb");
  ASSERT_EQ(sdk.substr(0, 2), std::string("\x0a\x09", 2));
  ASSERT_LT(model.size(), 128u);
  const std::string body = std::string("\x0a", 1) + static_cast<char>(model.size()) + model + sdk.substr(11);
  httplib::Client c("127.0.0.1", server_->port());
  c.set_read_timeout(60, 0);
  const httplib::Headers key = {{"X-API-Key", "tml-" + server_->key()}};
  auto posted = c.Post("/api/v1/forward_backward", key, body, "application/x-protobuf");
  ASSERT_TRUE(posted);
  ASSERT_EQ(posted->status, 200) << posted->body;
  const std::string id = Json::parse(posted->body)["request_id"];
  httplib::Headers accept = key;
  accept.emplace("Accept", "application/x-protobuf");
  std::string proto;
  for (int i = 0; i < 20 && proto.empty(); ++i) {
    auto r = c.Post("/api/v1/retrieve_future", accept,
                    Json{{"request_id", id}, {"allow_metadata_only", true}}.dump(), "application/json");
    ASSERT_TRUE(r);
    ASSERT_EQ(r->status, 200) << r->body;
    if (r->get_header_value("Content-Type").find("application/x-protobuf") != std::string::npos)
      proto = r->body;
  }
  ASSERT_FALSE(proto.empty()) << "no protobuf result";
  // ForwardBackwardOutput {1: type, 2: ArrayRecord {2: fields {1: name, 2: BatchedTensor {1: data}}},
  //                        3: metrics}
  std::vector<float> lp;
  bool loss_sum = false;
  for (const PbField& top : PbFields(proto)) {
    if (top.number == 3) loss_sum |= top.bytes.find("loss:sum") != std::string::npos;
    if (top.number != 2) continue;
    for (const PbField& rec : PbFields(top.bytes)) {
      if (rec.number != 2) continue;
      auto entry = PbFields(rec.bytes);
      if (entry.size() != 2 || entry[0].bytes != "logprobs") continue;
      for (const PbField& t : PbFields(entry[1].bytes)) {
        if (t.number != 1) continue;
        lp.resize(t.bytes.size() / 4);
        std::memcpy(lp.data(), t.bytes.data(), t.bytes.size());
      }
    }
  }
  EXPECT_TRUE(loss_sum);
  ASSERT_EQ(lp.size(), 3u);
  // The twin run (same seed) on the same datum in JSON.
  Json json = Result(ForwardBackward(twin, 1, Json::array({Datum({1, 2, 3, 4}, false)})));
  const Json& want = json["loss_fn_outputs"][0]["logprobs"]["data"];
  for (size_t i = 0; i < 3; ++i) EXPECT_EQ(lp[i], want[i].get<float>()) << i;
}

}  // namespace
}  // namespace burst::e2e
