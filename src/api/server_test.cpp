// The API server in process: what a hostile or careless client sends must
// get a clear 4xx, leave the server answering, and create nothing.
#include <atomic>
#include <vector>

#include "api/server_test_util.h"
#include "core/ids.h"
#include "store/keys.h"

namespace burst {
namespace {

// A job record straight into the database (no worker runs it): for the
// routes that read jobs.
void AddJob(Metadata& md, const std::string& org, const std::string& id, const Json& spec,
            JobStatus status = JobStatus::kQueued) {
  JobRecord job;
  job.id = id;
  job.status = status;
  job.org_id = org;
  job.request_sha256 = "sha-" + id;
  job.spec = spec;
  bool created = false;
  ASSERT_TRUE(md.CreateJob(job, &created).ok());
}

std::string Deep(int levels) { return std::string(levels, '[') + std::string(levels, ']'); }

TEST_F(ApiServerTest, DeepJsonIsRefusedOnEveryRouteAndTheServerStaysUp) {
  Start();
  const std::string deep = Deep(60000);
  auto c = Client(key_a_);
  for (const std::string path :
       {"/v1/fine_tuning/jobs", "/v1/fine_tuning/jobs/estimate", "/v1/evals", "/v1/sweeps", "/v1/deployments",
        "/v1/completions", "/v1/chat/completions"}) {
    for (const std::string& body :
         {R"({"user": )" + deep + "}", R"({"metadata": {"a": )" + deep + "}}", deep}) {
      auto r = c.Post(path, body, "application/json");
      ASSERT_TRUE(r) << path << ": the server went away";
      EXPECT_EQ(r->status, 400) << path << " " << r->body;
      const Json err = Json::parse(r->body)["error"];
      EXPECT_EQ(err["code"], "invalid_argument");
      EXPECT_NE(err["message"].get<std::string>().find("limit of 64 levels"), std::string::npos) << r->body;
    }
  }
  // The workers' routes too.
  auto [worker, token] = StartWorker();
  auto w = Client(token);
  auto r = w.Post("/internal/v1/events", R"({"job": "x", "attempt": 1, "events": )" + deep + "}",
                  "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 400) << r->body;
  ASSERT_TRUE(c.Get("/v1/health"));
}

TEST_F(ApiServerTest, TheKeyIsCheckedBeforeAnyBodyByteIsRead) {
  Start();
  // A 500 MB body declared, not one byte of it sent: the answer comes anyway.
  RawConn conn(port_);
  ASSERT_TRUE(
      conn.Send("POST /v1/fine_tuning/jobs HTTP/1.1\r\nHost: x\r\nContent-Length: 500000000\r\n\r\n"));
  bool closed = false;
  const std::string answer = conn.Read(3000, &closed);
  EXPECT_EQ(RawConn::StatusOf(answer), 401) << answer;
  EXPECT_EQ(Json::parse(RawConn::BodyOf(answer))["error"]["code"], "unauthenticated");
  EXPECT_TRUE(closed || conn.Read(1000, &closed).empty()) << "a refused connection is closed";
  EXPECT_TRUE(closed);
  // A bad key, the same.
  RawConn bad(port_);
  ASSERT_TRUE(
      bad.Send("POST /v1/files HTTP/1.1\r\nAuthorization: Bearer nope\r\nContent-Length: 400000000\r\n\r\n"));
  EXPECT_EQ(RawConn::StatusOf(bad.Read(3000)), 401);
}

TEST_F(ApiServerTest, BodyLimitsAreEnforcedFromContentLengthAndWhileStreaming) {
  Start();
  RawConn conn(port_);
  ASSERT_TRUE(conn.Send("POST /v1/fine_tuning/jobs HTTP/1.1\r\nAuthorization: Bearer " + key_a_ +
                        "\r\nContent-Length: 5000000\r\n\r\n"));
  const std::string answer = conn.Read(3000);
  EXPECT_EQ(RawConn::StatusOf(answer), 413) << answer;
  EXPECT_NE(answer.find("4194304"), std::string::npos) << "names the route's limit: " << answer;
  // Chunked: counted as it arrives.
  RawConn chunked(port_);
  ASSERT_TRUE(chunked.Send("POST /v1/completions HTTP/1.1\r\nAuthorization: Bearer " + key_a_ +
                           "\r\nTransfer-Encoding: chunked\r\n\r\n"));
  const std::string mib(1 << 20, ' ');
  char size[16];
  std::snprintf(size, sizeof size, "%zx\r\n", mib.size());
  std::string got;
  for (int i = 0; i < 6 && got.empty(); ++i) {
    chunked.Send(std::string(size) + mib + "\r\n");
    got = chunked.Read(200);
  }
  if (got.empty()) got = chunked.Read(2000);
  EXPECT_EQ(RawConn::StatusOf(got), 413) << got.substr(0, 200);
  // A form body over 8 KiB on a JSON route is a JSON question, not a 413.
  auto c = Client(key_a_);
  auto r = c.Post("/v1/fine_tuning/jobs", "a=" + std::string(9000, 'b'), "application/x-www-form-urlencoded");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 400) << r->body;
}

TEST_F(ApiServerTest, SlowHeadsAndSlowBodiesAreCutOff) {
  Start();
  RawConn head(port_);
  ASSERT_TRUE(head.Send("GET /v1/health HTTP/1.1\r\n"));
  bool closed = false;
  std::string got;
  const auto t0 = std::chrono::steady_clock::now();
  while (!closed && std::chrono::steady_clock::now() - t0 < std::chrono::seconds(5)) {
    head.Send("X");  // a byte at a time, never finishing the head
    got += head.Read(300, &closed);
  }
  EXPECT_TRUE(closed) << "the head deadline closes the connection";
  EXPECT_EQ(RawConn::StatusOf(got), 408) << got;

  RawConn body(port_);
  ASSERT_TRUE(body.Send("POST /v1/completions HTTP/1.1\r\nAuthorization: Bearer " + key_a_ +
                        "\r\nContent-Length: 100000\r\n\r\n{"));
  closed = false;
  got.clear();
  const auto t1 = std::chrono::steady_clock::now();
  while (!closed && std::chrono::steady_clock::now() - t1 < std::chrono::seconds(5)) {
    body.Send(" ");
    got += body.Read(300, &closed);
  }
  EXPECT_TRUE(closed);
  EXPECT_EQ(RawConn::StatusOf(got), 408) << got;
  EXPECT_GE(server_->stats().timed_out, 2);
}

TEST_F(ApiServerTest, SlowClientsHoldNoThreadAndOthersAreAnswered) {
  opt_.http.head_timeout_ms = 30'000;
  opt_.http.max_threads = 4;
  Start();
  // More slow clients than request threads, each mid-head from its own
  // address; authenticated requests are still answered.
  std::vector<std::unique_ptr<RawConn>> slow;
  for (int i = 0; i < 40; ++i) {
    slow.push_back(std::make_unique<RawConn>(port_, "127.0.1." + std::to_string(i + 1)));
    ASSERT_TRUE(slow.back()->Send("POST /v1/fine_tuning/jobs HTTP/1.1\r\nContent-Le"));
  }
  auto c = Client(key_a_);
  c.set_read_timeout(2, 0);
  for (int i = 0; i < 20; ++i) {
    auto r = c.Get("/v1/fine_tuning/jobs");
    ASSERT_TRUE(r) << "request " << i << " was not answered while slow clients wait";
    EXPECT_EQ(r->status, 200);
  }
  EXPECT_LE(server_->stats().threads, 4);
  EXPECT_GE(server_->stats().open, 40);
}

TEST_F(ApiServerTest, ConnectionsPerAddressAreCapped) {
  opt_.http.max_connections_per_address = 3;
  Start();
  std::vector<std::unique_ptr<RawConn>> held;
  for (int i = 0; i < 3; ++i) held.push_back(std::make_unique<RawConn>(port_, "127.0.2.1"));
  RawConn fourth(port_, "127.0.2.1");
  bool closed = false;
  const std::string got = fourth.Read(2000, &closed);
  EXPECT_EQ(RawConn::StatusOf(got), 503) << got;
  EXPECT_TRUE(closed);
  // Another address is not affected.
  RawConn other(port_, "127.0.2.2");
  ASSERT_TRUE(other.Send("GET /v1/health HTTP/1.1\r\nConnection: close\r\n\r\n"));
  EXPECT_EQ(RawConn::StatusOf(other.Read(2000)), 200);
  EXPECT_GE(server_->stats().refused, 1);
}

TEST_F(ApiServerTest, FramingErrorsAreRefused) {
  Start();
  RawConn two(port_);
  ASSERT_TRUE(two.Send("POST /v1/completions HTTP/1.1\r\nAuthorization: Bearer " + key_a_ +
                       "\r\nContent-Length: 2\r\nContent-Length: 20\r\n\r\n{}"));
  const std::string got = two.Read(2000);
  EXPECT_EQ(RawConn::StatusOf(got), 400) << got;
  EXPECT_NE(got.find("two different Content-Length"), std::string::npos);
  RawConn junk(port_);
  ASSERT_TRUE(junk.Send("\x16\x03\x01\x02\x05\x01\x07\x01\xfc\x03\x03\r\n\r\n"));
  EXPECT_EQ(RawConn::StatusOf(junk.Read(2000)), 400);
}

TEST_F(ApiServerTest, CancelWithoutABodyIsAccepted) {
  Start();
  // OpenAI's curl examples: POST .../cancel with no body, no Content-Length.
  RawConn conn(port_);
  ASSERT_TRUE(
      conn.Send("POST /v1/fine_tuning/jobs/ftjob-nosuchjob/cancel HTTP/1.1\r\nAuthorization: Bearer " +
                key_a_ + "\r\nConnection: close\r\n\r\n"));
  const std::string got = conn.Read(2000);
  EXPECT_EQ(RawConn::StatusOf(got), 404) << got;
  EXPECT_NE(got.find("ftjob-nosuchjob"), std::string::npos) << got;
}

TEST_F(ApiServerTest, InvalidUtf8FilenameIsRefusedAndCreatesNothing) {
  Start();
  auto c = Client(key_a_);
  httplib::MultipartFormDataItems items = {
      {"purpose", "fine-tune", "", ""}, {"file", "{\"text\": \"hello\"}\n", "\xff\xfe", "application/jsonl"}};
  auto r = c.Post("/v1/files", items);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 400) << r->body;
  EXPECT_EQ(Json::parse(r->body)["error"]["param"], "filename");
  auto list = c.Get("/v1/files");
  ASSERT_TRUE(list);
  EXPECT_EQ(list->status, 200) << list->body;
  EXPECT_TRUE(Json::parse(list->body)["data"].empty()) << "a failed upload creates nothing";
  EXPECT_TRUE(Must(store_->List("orgs/")).empty());
}

TEST_F(ApiServerTest, InvalidUtf8InsideJsonlNamesFileAndLine) {
  Start();
  auto c = Client(key_a_);
  httplib::MultipartFormDataItems items = {
      {"purpose", "fine-tune", "", ""},
      {"file", "{\"text\": \"fine\"}\n{\"text\": \"bad \xff\xfe here\"}\n", "train.jsonl",
       "application/jsonl"}};
  auto r = c.Post("/v1/files", items);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 400) << r->body;
  const Json err = Json::parse(r->body)["error"];
  EXPECT_EQ(err["param"], "train.jsonl:2") << r->body;
  EXPECT_TRUE(Json::parse(c.Get("/v1/files")->body)["data"].empty());
}

TEST_F(ApiServerTest, AStoredBadFilenameCannotBreakTheListing) {
  Start();
  // A record written before names were checked.
  FileRecord f;
  f.id = NewId("file");
  f.org_id = org_a_;
  f.filename = "\xff\xfe";
  f.purpose = "fine-tune";
  f.object_key = FileKey(org_a_, f.id);
  ASSERT_TRUE(md_->CreateFile(f).ok());
  auto r = Client(key_a_).Get("/v1/files");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200) << r->body;
  EXPECT_EQ(Json::parse(r->body)["data"].size(), 1u);
}

TEST_F(ApiServerTest, CheckpointNamesAreParsedStrictly) {
  Start();
  auto c = Client(key_a_);
  for (const std::string model :
       {"ftjob-abc:step-4abc", "ftjob-abc:step-4/../../x", "ftjob-abc:step-4.9", "ftjob-abc:step-",
        "ftjob-abc:step-04", "ftckpt-abc-4x", "ftjob-ABC:step-4"}) {
    auto r = c.Post("/v1/completions", Json{{"model", model}, {"prompt", "hi"}}.dump(), "application/json");
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 400) << model << ": " << r->body;
    EXPECT_EQ(Json::parse(r->body)["error"]["param"], "model");
  }
  // A well-formed name of a checkpoint that does not exist is 404.
  auto r = c.Post("/v1/completions", Json{{"model", "ftjob-abc:step-4"}, {"prompt", "hi"}}.dump(),
                  "application/json");
  EXPECT_EQ(r->status, 404) << r->body;
}

TEST_F(ApiServerTest, WorkerRoutesAnswerMalformedBodiesWith400) {
  Start();
  auto [worker, token] = StartWorker();
  auto w = Client(token);
  for (const std::string& body :
       {std::string("{}"), std::string(R"({"job": 5, "attempt": 1})"),
        std::string(R"({"job": "x", "attempt": "one"})"), std::string("[]"), std::string("not json")}) {
    for (const char* route : {"/internal/v1/heartbeat", "/internal/v1/checkpoint", "/internal/v1/finish"}) {
      auto r = w.Post(route, body, "application/json");
      ASSERT_TRUE(r);
      EXPECT_EQ(r->status, 400) << route << " " << body << ": " << r->body;
    }
  }
  auto r = w.Post("/internal/v1/sample_chunks", R"({"id": "smpl-x", "chunks": 7})", "application/json");
  EXPECT_EQ(r->status, 400) << r->body;
  // A batch's pieces in one post: each call an object with an id and a list.
  for (const std::string& body : {std::string(R"({"calls": 7})"), std::string(R"({"calls": [7]})"),
                                  std::string(R"({"calls": [{"chunks": []}]})"),
                                  std::string(R"({"calls": [{"id": "smpl-x", "chunks": 7}]})")}) {
    r = w.Post("/internal/v1/sample_chunks", body, "application/json");
    EXPECT_EQ(r->status, 400) << body << ": " << r->body;
  }
  Json calls = Json::array();
  for (int i = 0; i < 257; ++i)
    calls.push_back({{"id", "smpl-" + std::to_string(i)}, {"chunks", Json::array()}});
  r = w.Post("/internal/v1/sample_chunks", Json{{"calls", calls}}.dump(), "application/json");
  EXPECT_EQ(r->status, 400) << r->body;
  EXPECT_EQ(Json::parse(r->body)["error"]["param"], "calls") << r->body;
  // Calls that are not this worker's: named in "stop" (as 409 says for one call alone).
  r = w.Post("/internal/v1/sample_chunks", R"({"calls": [{"id": "smpl-x", "chunks": []}]})",
             "application/json");
  EXPECT_EQ(r->status, 200) << r->body;
  EXPECT_EQ(Json::parse(r->body)["stop"], Json::array({"smpl-x"})) << r->body;
  // What a lease says the worker holds: a short list of strings.
  Json many = Json::array();
  for (int i = 0; i < 65; ++i)
    many.push_back("orgs/o/jobs/j/checkpoints/step-" + std::to_string(i) + "/sampler/");
  for (const Json& held : {Json("one"), Json::array({7}), many}) {
    r = w.Post("/internal/v1/lease", Json{{"wait_ms", 0}, {"checkpoints", held}}.dump(), "application/json");
    EXPECT_EQ(r->status, 400) << held.dump().substr(0, 80) << ": " << r->body;
    EXPECT_EQ(Json::parse(r->body)["error"]["param"], "checkpoints") << r->body;
  }
  // Without the token: 401 with its own code.
  auto anon = Client("");
  r = anon.Post("/internal/v1/lease", "{}", "application/json");
  EXPECT_EQ(r->status, 401);
  EXPECT_EQ(Json::parse(r->body)["error"]["code"], "unauthenticated");
}

TEST_F(ApiServerTest, ErrorsDoNotNameTheServersFolders) {
  Start();
  const std::string root = opt_.model_roots[0].string();
  auto c = Client(key_a_);
  for (const std::string model : {"no-such-model", "../../etc", "/etc/passwd"}) {
    auto r = c.Post("/v1/fine_tuning/jobs", Json{{"model", model}, {"training_file", "file-x"}}.dump(),
                    "application/json");
    ASSERT_TRUE(r);
    EXPECT_GE(r->status, 400);
    EXPECT_EQ(r->body.find(root), std::string::npos) << r->body;
  }
}

// GET /v1/models lists the base models (created, owned_by, no server
// folder), then the organisation's checkpoints and live deployments, each
// by the name sampling takes; GET /v1/models/{id} answers one, whichever
// way the ':' of JOB:step-N arrives, and 404 for another organisation's.
TEST_F(ApiServerTest, ModelsListBaseModelsCheckpointsAndDeployments) {
  AddJob(*md_, org_a_, "ftjob-abc", {{"model", "burst-small"}});
  for (int64_t step : {2, 4}) {
    const std::string job = "ftjob-abc";
    CheckpointRecord c;
    c.job_id = job;
    c.step = step;
    c.created_at = 1000 + step;
    c.prefix = "orgs/a/jobs/ftjob-abc/checkpoints/step-" + std::to_string(step) + "/";
    ASSERT_TRUE(md_->AddCheckpoint(c).ok());
  }
  DeploymentRecord d;
  d.id = "dep-1";
  d.org_id = org_a_;
  d.name = "support-bot";
  d.created_at = 1500;
  d.request_sha256 = "r";
  d.target = {{"checkpoint", "ftjob-abc:step-4"}};
  bool created = false;
  ASSERT_TRUE(md_->CreateDeployment(d, &created).ok());
  Start();
  const std::string root = opt_.model_roots[0].string();
  auto a = Client(key_a_);
  auto list = a.Get("/v1/models");
  ASSERT_TRUE(list);
  ASSERT_EQ(list->status, 200) << list->body;
  EXPECT_EQ(list->body.find(root), std::string::npos) << "no server folder: " << list->body;
  std::vector<std::string> ids;
  const Json listed = Json::parse(list->body);
  for (const Json& m : listed["data"]) {
    ids.push_back(m["id"]);
    EXPECT_EQ(m["object"], "model");
    EXPECT_TRUE(m["created"].is_number_integer() && m["created"].get<int64_t>() > 0) << m.dump();
    EXPECT_TRUE(m["owned_by"].is_string()) << m.dump();
    EXPECT_FALSE(m.contains("path")) << m.dump();
  }
  EXPECT_EQ(ids,
            (std::vector<std::string>{"burst-small", "ftjob-abc:step-4", "ftjob-abc:step-2", "support-bot"}));

  auto get = [&](httplib::Client& c, const std::string& id) {
    auto r = c.Get("/v1/models/" + id);
    EXPECT_TRUE(r);
    return r ? std::make_pair(r->status, Json::parse(r->body)) : std::make_pair(0, Json());
  };
  auto [st, ckpt] = get(a, "ftjob-abc:step-2");
  EXPECT_EQ(st, 200);
  EXPECT_EQ(ckpt["owned_by"], org_a_);
  EXPECT_EQ(ckpt["created"], 1002);
  EXPECT_EQ(ckpt["burst"]["base_model"], "burst-small");
  EXPECT_EQ(get(a, "ftjob-abc%3Astep-2").second["id"], "ftjob-abc:step-2");
  EXPECT_EQ(get(a, "ftckpt-abc-4").second["id"], "ftjob-abc:step-4");
  EXPECT_EQ(get(a, "burst-small").second["owned_by"], "burst");
  EXPECT_EQ(get(a, "support-bot").second["burst"]["deployment_id"], "dep-1");
  for (const std::string missing : {"ftjob-abc:step-3", "ftjob-zzz:step-2", "no-such-model"}) {
    auto [code, err] = get(a, missing);
    EXPECT_EQ(code, 404) << missing;
    EXPECT_EQ(err["error"]["param"], "model") << err.dump();
  }
  EXPECT_EQ(get(a, "ftjob-abc%3").first, 400);
  // Another organisation sees the base models only.
  auto b = Client(key_b_);
  EXPECT_EQ(get(b, "ftjob-abc:step-2").first, 404);
  EXPECT_EQ(get(b, "support-bot").first, 404);
  auto other = b.Get("/v1/models");
  ASSERT_TRUE(other);
  EXPECT_EQ(Json::parse(other->body)["data"].size(), 1u) << other->body;
}

// A job created with a suffix names its checkpoints JOB:SUFFIX:step-N; the
// plain JOB:step-N still finds them, another suffix does not.
TEST_F(ApiServerTest, ASuffixIsPartOfTheCheckpointsName) {
  AddJob(*md_, org_a_, "ftjob-sfx", {{"model", "burst-small"}, {"suffix", "bot-v1"}}, JobStatus::kSucceeded);
  ASSERT_TRUE(
      md_->AddCheckpoint(CheckpointRecord{"ftjob-sfx", 2, 0, Json::object(), "orgs/a/jobs/ftjob-sfx/s2/"})
          .ok());
  Start();
  auto a = Client(key_a_);
  auto list = a.Get("/v1/models");
  ASSERT_TRUE(list);
  EXPECT_NE(list->body.find("\"ftjob-sfx:bot-v1:step-2\""), std::string::npos) << list->body;
  auto cps = a.Get("/v1/fine_tuning/jobs/ftjob-sfx/checkpoints");
  ASSERT_TRUE(cps);
  EXPECT_EQ(Json::parse(cps->body)["data"][0]["fine_tuned_model_checkpoint"], "ftjob-sfx:bot-v1:step-2")
      << cps->body;
  for (const std::string name : {"ftjob-sfx:bot-v1:step-2", "ftjob-sfx:step-2", "ftckpt-sfx-2"}) {
    auto r = a.Get("/v1/models/" + name);
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 200) << name << ": " << r->body;
    EXPECT_EQ(Json::parse(r->body)["id"], "ftjob-sfx:bot-v1:step-2") << name;
  }
  auto other = a.Get("/v1/models/ftjob-sfx:bot-v2:step-2");
  ASSERT_TRUE(other);
  EXPECT_EQ(other->status, 404) << other->body;
  auto bad = a.Post("/v1/fine_tuning/jobs",
                    Json{{"model", "burst-small"}, {"training_file", "file-x"}, {"suffix", "a:b"}}.dump(),
                    "application/json");
  ASSERT_TRUE(bad);
  EXPECT_EQ(bad->status, 400);
  EXPECT_EQ(Json::parse(bad->body)["error"]["param"], "suffix") << bad->body;
}

// DELETE /v1/models/{id} deletes one fine-tuned checkpoint of an ended job:
// its objects and its row, nothing beside it; a running job's, a deployed
// one's, a base model and a deployment's name are refused, naming why.
TEST_F(ApiServerTest, DeleteModelRemovesOneCheckpointOfAnEndedJob) {
  AddJob(*md_, org_a_, "ftjob-done", {{"model", "burst-small"}}, JobStatus::kSucceeded);
  AddJob(*md_, org_a_, "ftjob-busy", {{"model", "burst-small"}}, JobStatus::kRunning);
  const auto prefix = [](const std::string& job, int64_t step) {
    return "orgs/a/jobs/" + job + "/checkpoints/step-" + std::to_string(step) + "/";
  };
  for (const std::string job : {"ftjob-done", "ftjob-busy"}) {
    for (int64_t step : {2, 4}) {
      ASSERT_TRUE(md_->AddCheckpoint(CheckpointRecord{job, step, 0, Json::object(), prefix(job, step)}).ok());
      for (const char* file :
           {"sampler/manifest.json", "sampler/adapter_model.safetensors", "state/manifest.json"}) {
        ASSERT_TRUE(store_->Put(prefix(job, step) + file, "x").ok());
      }
    }
  }
  DeploymentRecord d;
  d.id = "dep-1";
  d.org_id = org_a_;
  d.name = "bot";
  d.request_sha256 = "r";
  d.target = {{"checkpoint_prefix", prefix("ftjob-done", 4) + "sampler/"}};
  bool created = false;
  ASSERT_TRUE(md_->CreateDeployment(d, &created).ok());
  Start();
  auto a = Client(key_a_);
  const auto del = [&](httplib::Client& c, const std::string& id) {
    auto r = c.Delete("/v1/models/" + id);
    EXPECT_TRUE(r);
    return r ? std::make_pair(r->status, Json::parse(r->body)) : std::make_pair(0, Json());
  };
  auto [st, body] = del(a, "ftjob-done:step-2");
  EXPECT_EQ(st, 200) << body.dump();
  EXPECT_EQ(body, (Json{{"id", "ftjob-done:step-2"}, {"object", "model"}, {"deleted", true}}));
  EXPECT_TRUE(Must(store_->List(prefix("ftjob-done", 2))).empty()) << "its objects are gone";
  EXPECT_EQ(Must(store_->List(prefix("ftjob-done", 4))).size(), 3u) << "the step beside it is kept";
  auto cps = Must(md_->ListCheckpoints("ftjob-done", 0, 10));
  ASSERT_EQ(cps.size(), 1u);
  EXPECT_EQ(cps[0].step, 4);
  EXPECT_EQ(a.Get("/v1/models/ftjob-done:step-2")->status, 404);
  EXPECT_EQ(del(a, "ftckpt-done-2").first, 404) << "again: gone";

  const auto refused = [&](const std::string& id, int status, const std::string& says) {
    auto [code, err] = del(a, id);
    EXPECT_EQ(code, status) << id << ": " << err.dump();
    EXPECT_EQ(err["error"]["param"], "model") << err.dump();
    EXPECT_NE(err["error"]["message"].get<std::string>().find(says), std::string::npos) << err.dump();
  };
  refused("ftjob-done:step-4", 409, "deployment bot");
  refused("ftjob-busy:step-2", 409, "running");
  refused("burst-small", 400, "base model");
  refused("bot", 400, "DELETE /v1/deployments/bot");
  refused("no-such-model", 404, "not found");
  auto b = Client(key_b_);
  EXPECT_EQ(del(b, "ftjob-done:step-4").first, 404) << "another organisation's";
  EXPECT_EQ(Must(store_->List(prefix("ftjob-busy", 2))).size(), 3u);
  EXPECT_EQ(Must(store_->List(prefix("ftjob-done", 4))).size(), 3u);
}

// GET /v1/fine_tuning/jobs?metadata[k]=v lists the jobs whose metadata has
// every pair asked for, paged as the unfiltered list.
TEST_F(ApiServerTest, JobsListFiltersOnMetadata) {
  for (int i = 0; i < 5; ++i) {
    AddJob(*md_, org_a_, "ftjob-m" + std::to_string(i),
           {{"model", "burst-small"},
            {"metadata", {{"team", i % 2 == 0 ? "search" : "ads"}, {"run", std::to_string(i)}}}});
  }
  Start();
  auto a = Client(key_a_);
  auto ids = [&](const std::string& query, bool* more = nullptr) {
    auto r = a.Get("/v1/fine_tuning/jobs?" + query);
    std::vector<std::string> out;
    EXPECT_TRUE(r && r->status == 200) << (r ? r->body : "no answer");
    if (!r || r->status != 200) return out;
    const Json page = Json::parse(r->body);
    for (const Json& j : page["data"]) out.push_back(j["id"]);
    if (more) *more = page["has_more"];
    return out;
  };
  EXPECT_EQ(ids("metadata[team]=search"), (std::vector<std::string>{"ftjob-m4", "ftjob-m2", "ftjob-m0"}));
  EXPECT_EQ(ids("metadata%5Bteam%5D=ads&metadata[run]=3"), (std::vector<std::string>{"ftjob-m3"}));
  bool more = false;
  EXPECT_EQ(ids("metadata[team]=search&limit=2", &more), (std::vector<std::string>{"ftjob-m4", "ftjob-m2"}));
  EXPECT_TRUE(more);
  EXPECT_EQ(ids("metadata[team]=search&limit=2&after=ftjob-m2", &more),
            (std::vector<std::string>{"ftjob-m0"}));
  EXPECT_FALSE(more);
  EXPECT_TRUE(ids("metadata[team]=none").empty());
  auto bad = a.Get("/v1/fine_tuning/jobs?metadata=team");
  ASSERT_TRUE(bad);
  EXPECT_EQ(bad->status, 400);
  EXPECT_EQ(Json::parse(bad->body)["error"]["param"], "metadata");
}

// A succeeded job lists its result file; GET /v1/files/{id}[/content] reads
// it as CSV of its metrics; before success, or for another organisation,
// there is none.
TEST_F(ApiServerTest, ASucceededJobsResultFileIsItsMetricsAsCsv) {
  AddJob(*md_, org_a_, "ftjob-res", {{"model", "burst-small"}});
  ASSERT_TRUE(store_
                  ->Put("orgs/" + org_a_ + "/jobs/ftjob-res/metrics.jsonl",
                        R"({"type":"train","step":1,"train_loss":2.5})"
                        "\n"
                        R"({"type":"train","step":2,"train_loss":2})"
                        "\n")
                  .ok());
  Start();
  auto a = Client(key_a_);
  auto listed = [&] {
    auto r = a.Get("/v1/fine_tuning/jobs/ftjob-res");
    return r ? Json::parse(r->body)["result_files"] : Json();
  };
  EXPECT_EQ(listed(), Json::array()) << "queued: no result file yet";
  EXPECT_EQ(a.Get("/v1/files/file-res-metrics")->status, 404);
  JobRecord job = Must(md_->GetJob(org_a_, "ftjob-res"));
  job.status = JobStatus::kSucceeded;
  job.finished_at = 1234;
  ASSERT_TRUE(md_->UpdateJob(job).ok());
  EXPECT_EQ(listed(), Json::array({"file-res-metrics"}));
  auto meta = a.Get("/v1/files/file-res-metrics");
  ASSERT_TRUE(meta);
  ASSERT_EQ(meta->status, 200) << meta->body;
  EXPECT_EQ(Json::parse(meta->body)["purpose"], "fine-tune-results");
  EXPECT_EQ(Json::parse(meta->body)["created_at"], 1234);
  auto content = a.Get("/v1/files/file-res-metrics/content");
  ASSERT_TRUE(content);
  EXPECT_EQ(content->body,
            "step,train_loss,train_accuracy,valid_loss,valid_mean_token_accuracy\n1,2.5,,,\n2,2,,,\n");
  EXPECT_EQ(Client(key_b_).Get("/v1/files/file-res-metrics/content")->status, 404);
}

// Errors carry OpenAI's `type` beside Burst's code, message and param.
TEST_F(ApiServerTest, ErrorsCarryOpenAisType) {
  Start();
  auto a = Client(key_a_);
  auto bad = a.Post("/v1/fine_tuning/jobs",
                    Json{{"model", "burst-small"},
                         {"training_file", "file-x"},
                         {"integrations", {{{"type", "wandb"}, {"wandb", {{"project", "p"}}}}}}}
                        .dump(),
                    "application/json");
  ASSERT_TRUE(bad);
  EXPECT_EQ(bad->status, 400);
  const Json e = Json::parse(bad->body)["error"];
  EXPECT_EQ(e["param"], "integrations") << bad->body;
  EXPECT_EQ(e["type"], "invalid_request_error");
  auto missing = a.Get("/v1/models/no-such-model");
  ASSERT_TRUE(missing);
  EXPECT_EQ(Json::parse(missing->body)["error"]["type"], "invalid_request_error");
  auto nokey = Client("sk-wrong").Get("/v1/models");
  ASSERT_TRUE(nokey);
  EXPECT_EQ(nokey->status, 401);
  EXPECT_EQ(Json::parse(nokey->body)["error"]["type"], "authentication_error") << nokey->body;
}

TEST_F(ApiServerTest, UnknownRoutesAndMethodsGetTheErrorShape) {
  Start();
  auto c = Client(key_a_);
  auto r = c.Get("/v1/nothing-here");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 404);
  EXPECT_EQ(Json::parse(r->body)["error"]["code"], "not_found");
  r = c.Put("/v1/files", "{}", "application/json");
  EXPECT_EQ(r->status, 405);
  EXPECT_EQ(r->get_header_value("Allow"), "POST, GET");
}

}  // namespace
}  // namespace burst
