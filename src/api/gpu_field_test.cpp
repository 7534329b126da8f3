// The `gpu` field over HTTP: on a server of CPU slots every kind of request
// that takes it is refused with 400 naming it and creates nothing; on a
// server with GPUs a job that asks for one is accepted and queued for it.
#include <gtest/gtest.h>

#include "api/server_test_util.h"

namespace burst {
namespace {

TEST_F(ApiServerTest, RequestsForAGpuAreRefusedOnCpuSlotsAndCreateNothing) {
  Start();
  auto c = Client(key_a_);
  const std::vector<std::pair<std::string, Json>> posts = {
      {"/v1/fine_tuning/jobs", {{"model", "burst-small"}, {"training_file", "file-x"}, {"gpu", "h100"}}},
      {"/v1/evals", {{"model", "burst-small"}, {"file", "file-x"}, {"gpu", "any"}}},
      {"/v1/deployments",
       {{"name", "d1"}, {"checkpoint", "burst-small"}, {"gpu", Json::array({"h100", "any"})}}},
      {"/v1/sweeps",
       {{"job", {{"model", "burst-small"}, {"training_file", "file-x"}, {"gpu", "l40s:2"}}},
        {"grid", {{"learning_rate_multiplier", {1, 2}}}}}},
  };
  for (const auto& [path, body] : posts) {
    SCOPED_TRACE(path);
    auto r = c.Post(path, body.dump(), "application/json");
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 400) << r->body;
    const Json e = Json::parse(r->body)["error"];
    EXPECT_NE(e["param"].get<std::string>().find("gpu"), std::string::npos) << r->body;
    EXPECT_NE(e["message"].get<std::string>().find("CPU slot"), std::string::npos) << r->body;
  }
  for (const char* list : {"/v1/fine_tuning/jobs", "/v1/evals", "/v1/deployments", "/v1/sweeps"}) {
    auto r = c.Get(list);
    ASSERT_TRUE(r);
    EXPECT_TRUE(Json::parse(r->body)["data"].empty()) << list << ": " << r->body;
  }
}

// A server whose pool has two H100s (fake: the executor is fake too).
TEST_F(ApiServerTest, AJobThatAsksForAGpuTrainsOnItAndOneThePoolLacksIsRefused) {
  ro_.gpus = {{0, "h100", "NVIDIA H100 80GB HBM3", "GPU-0"}, {1, "h100", "NVIDIA H100 80GB HBM3", "GPU-1"}};
  ro_.price_per_gpu_second = {{"h100", 0.001}};
  Start();
  auto c = Client(key_a_);
  httplib::MultipartFormDataItems items = {
      {"purpose", "fine-tune", "", ""},
      {"file", "{\"prompt\": \"a\", \"completion\": \"b\"}\n", "train.jsonl", "application/jsonl"}};
  auto up = c.Post("/v1/files", items);
  ASSERT_TRUE(up);
  ASSERT_EQ(up->status, 200) << up->body;
  const std::string file = Json::parse(up->body)["id"];
  auto post = [&](Json body) {
    body["model"] = "burst-small";
    body["training_file"] = file;
    return c.Post("/v1/fine_tuning/jobs", body.dump(), "application/json");
  };
  // Refused: a type the pool has not, more than it has, a gang it cannot
  // hold at once, a CPU recipe with a GPU.
  for (const Json& bad :
       {Json{{"gpu", "l40s"}}, Json{{"gpu", "h100:3"}}, Json{{"gpu", "h100"}, {"workers", 3}},
        Json{{"gpu", "h100"}, {"recipe", {{"device", "cpu"}}}}}) {
    SCOPED_TRACE(bad.dump());
    auto r = post(bad);
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 400) << r->body;
    const std::string param = Json::parse(r->body)["error"]["param"];
    EXPECT_TRUE(param == "gpu" || param == "recipe.device") << r->body;
  }
  // A CUDA recipe without gpu says how to ask for one.
  auto cuda = post({{"recipe", {{"device", "cuda"}}}});
  ASSERT_TRUE(cuda);
  EXPECT_EQ(cuda->status, 400);
  EXPECT_NE(Json::parse(cuda->body)["error"]["message"].get<std::string>().find("\"gpu\": \"h100\""),
            std::string::npos)
      << cuda->body;
  EXPECT_TRUE(Json::parse(c.Get("/v1/fine_tuning/jobs")->body)["data"].empty()) << "nothing was created";
  // Accepted: the job trains on CUDA, on a worker holding one H100.
  auto ok = post({{"gpu", Json::array({"l40s", "H100"})}});
  ASSERT_TRUE(ok);
  ASSERT_EQ(ok->status, 200) << ok->body;
  const Json job = Json::parse(ok->body);
  EXPECT_EQ(job["gpu"], Json::array({"l40s", "h100"}));
  const JobRecord rec = Must(md_->GetJobById(job["id"]));
  EXPECT_EQ(rec.spec["recipe"]["device"], "cuda");
  ASSERT_EQ(exec_.Started().size(), 1u);
  EXPECT_EQ(exec_.Started()[0].device, "h100");
  // The estimate prices it per GPU of its type.
  auto est = c.Post("/v1/fine_tuning/jobs/estimate",
                    Json{{"model", "burst-small"}, {"training_file", file}, {"gpu", "h100:2"}}.dump(),
                    "application/json");
  ASSERT_TRUE(est);
  ASSERT_EQ(est->status, 200) << est->body;
  const Json e = Json::parse(est->body);
  EXPECT_EQ(e["device"], "h100:2");
  EXPECT_DOUBLE_EQ(e["price_per_worker_hour"].get<double>(), 2 * 3.6);
  EXPECT_NE(e["tokens_per_second_source"].get<std::string>().find("40% of h100"), std::string::npos)
      << e.dump();
  EXPECT_NEAR(e["cost_if_dedicated"].get<double>(), e["seconds"].get<double>() * 2 * 0.001, 1e-12);
  // The pool and its prices, as clients see them.
  const Json workers = Json::parse(c.Get("/v1/workers")->body);
  EXPECT_EQ(workers["gpus"].size(), 2u);
  EXPECT_EQ(workers["data"][0]["device"], "h100");
  const Json prices = Json::parse(c.Get("/v1/prices")->body)["prices"]["dedicated"];
  EXPECT_DOUBLE_EQ(prices["h100"]["per_gpu_hour"].get<double>(), 3.6);
  EXPECT_EQ(prices["h100"]["gpus"], 2);
}

}  // namespace
}  // namespace burst
