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

}  // namespace
}  // namespace burst
