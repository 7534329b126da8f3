// The `gpu` field (gpu_request.h): its forms, its refusals by field, and the
// choice against pools of fake GPU types; over HTTP, every kind of request
// that takes it is refused with 400 naming it on a server of CPU slots, and
// creates nothing.
#include "api/gpu_request.h"

#include <gtest/gtest.h>

#include <functional>

#include "api/server_test_util.h"

namespace burst {
namespace {

// fn throws a burst::Error of `code` whose message holds every needle.
void ExpectBurstError(const std::function<void()>& fn, Code code, const std::vector<std::string>& needles) {
  try {
    fn();
    ADD_FAILURE() << "nothing was thrown";
  } catch (const Error& e) {
    EXPECT_EQ(e.status().code(), code) << e.what();
    for (const auto& n : needles) EXPECT_NE(std::string(e.what()).find(n), std::string::npos) << e.what();
  }
}

TEST(GpuRequest, TakesATypeACountAnyAndAListInOrder) {
  EXPECT_FALSE(ParseGpuRequest(Json(), "gpu").Asks());
  GpuRequest one = ParseGpuRequest("H100", "gpu");
  ASSERT_EQ(one.options.size(), 1u);
  EXPECT_EQ(one.options[0].type, "h100");
  EXPECT_EQ(one.options[0].count, 1);
  GpuRequest list = ParseGpuRequest(Json::array({"h100:2", "a100-80gb:2", "any"}), "gpu");
  ASSERT_EQ(list.options.size(), 3u);
  EXPECT_EQ(list.options[1].type, "a100-80gb");
  EXPECT_EQ(list.options[1].count, 2);
  EXPECT_EQ(list.options[2].type, "any");
}

TEST(GpuRequest, RefusesOtherFormsNamingTheField) {
  for (const Json& bad : {Json(3), Json("h100:0"), Json("h100:9"), Json("h100:x"), Json(""), Json("h 100"),
                          Json(std::string(33, 'a')), Json::object(), Json::array()}) {
    SCOPED_TRACE(bad.dump());
    ExpectBurstError([&] { ParseGpuRequest(bad, "gpu"); }, Code::kInvalidArgument, {"gpu"});
  }
  ExpectBurstError(
      [&] {
        ParseGpuRequest(Json::array({"h100", "H100"}), "gpu");
      },
      Code::kInvalidArgument, {"gpu[1]", "repeats"});
  ExpectBurstError(
      [&] {
        ParseGpuRequest(Json::array({"h100", 2}), "gpu");
      },
      Code::kInvalidArgument, {"gpu[1]"});
  Json nine = Json::array();
  for (int i = 0; i < 9; ++i) nine.push_back("t" + std::to_string(i));
  ExpectBurstError([&] { ParseGpuRequest(nine, "gpu"); }, Code::kInvalidArgument, {"gpu", "1 to 8"});
}

TEST(GpuRequest, TheFirstOptionThePoolCanGiveElseWhatItHas) {
  const SlotPool pool{{{"h100", 2}, {"l40s", 4}}, 3, 2};
  EXPECT_EQ(CheckGpuRequest(ParseGpuRequest("l40s:4", "gpu"), pool, "gpu").type, "l40s");
  const GpuOption any = CheckGpuRequest(ParseGpuRequest("any:3", "gpu"), pool, "gpu");
  EXPECT_EQ(any.type, "l40s") << "only the l40s come three at once";
  EXPECT_EQ(CheckGpuRequest(ParseGpuRequest(Json::array({"h200", "h100:2"}), "gpu"), pool, "gpu").type,
            "h100");
  ExpectBurstError([&] { CheckGpuRequest(ParseGpuRequest("h100:4", "gpu"), pool, "gpu"); },
                   Code::kInvalidArgument, {"gpu", "2 x h100, 4 x l40s, 3 CPU slots of 2 threads"});
  ExpectBurstError(
      [&] {
        CheckGpuRequest(ParseGpuRequest("any", "gpu"), SlotPool{{}, 1, 4}, "gpu");
      },
      Code::kInvalidArgument, {"1 CPU slot of 4 threads", "leave gpu out to run on a CPU slot"});
}

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
