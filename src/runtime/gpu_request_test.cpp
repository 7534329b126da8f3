// The `gpu` field (gpu_request.h): its forms, its refusals by field, and the
// choice against pools of fake GPU types.
#include "runtime/gpu_request.h"

#include <gtest/gtest.h>

#include <functional>

#include "core/status.h"

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

TEST(GpuRequest, ResolvesToTheClaimsThePoolCanGiveInOrderElseSaysWhatItHas) {
  const SlotPool pool{{{"h100", 2}, {"l40s", 4}}, 3, 2};
  auto texts = [](const std::vector<DeviceClaim>& cs) {
    std::vector<std::string> out;
    for (const DeviceClaim& c : cs) out.push_back(c.Text());
    return out;
  };
  EXPECT_EQ(texts(ResolveGpuRequest(ParseGpuRequest("l40s:4", "gpu"), pool, 1, "gpu")),
            std::vector<std::string>{"l40s:4"});
  EXPECT_EQ(texts(ResolveGpuRequest(ParseGpuRequest("any:3", "gpu"), pool, 1, "gpu")),
            std::vector<std::string>{"l40s:3"})
      << "only the l40s come three at once";
  EXPECT_EQ(texts(ResolveGpuRequest(ParseGpuRequest(Json::array({"h200", "h100:2", "any"}), "gpu"), pool, 1,
                                    "gpu")),
            (std::vector<std::string>{"h100:2", "h100", "l40s"}))
      << "h200 is dropped, any expands in the pool's order";
  EXPECT_EQ(texts(ResolveGpuRequest(ParseGpuRequest("any", "gpu"), pool, 3, "gpu")),
            std::vector<std::string>{"l40s"})
      << "three workers of one GPU each fit only on the l40s";
  ExpectBurstError([&] { ResolveGpuRequest(ParseGpuRequest("h100:4", "gpu"), pool, 1, "gpu"); },
                   Code::kInvalidArgument, {"gpu", "2 x h100, 4 x l40s, 3 CPU slots of 2 threads"});
  ExpectBurstError([&] { ResolveGpuRequest(ParseGpuRequest("h100", "gpu"), pool, 3, "gpu"); },
                   Code::kInvalidArgument, {"gpu", "each of 3 workers"});
  ExpectBurstError(
      [&] {
        ResolveGpuRequest(ParseGpuRequest("any", "gpu"), SlotPool{{}, 1, 4}, 1, "gpu");
      },
      Code::kInvalidArgument, {"1 CPU slot of 4 threads", "leave gpu out to run on a CPU slot"});
}

TEST(GpuRequest, AJobKeepsItsGpuTypesWhenThePoolNoLongerHasThem) {
  std::vector<DeviceClaim> out;
  EXPECT_TRUE(TaskDevices(Json::object(), SlotPool{}, 1, &out).ok());
  EXPECT_TRUE(out.empty()) << "no gpu: a CPU slot";
  const Json spec = {{"gpu", GpuRequestJson(ParseGpuRequest(Json::array({"H100:2", "any"}), "gpu"))}};
  EXPECT_EQ(spec["gpu"], Json::array({"h100:2", "any"}));
  ASSERT_TRUE(TaskDevices(spec, SlotPool{{{"h100", 2}}, 1, 1}, 1, &out).ok());
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[0].Text(), "h100:2");
  EXPECT_EQ(out[1].Text(), "h100") << "any: one of any type";
  // Accepted on a pool of two H100s, recovered on a pool of none: it waits
  // for its H100s, never for a CPU slot.
  Status s = TaskDevices(spec, SlotPool{{}, 4, 1}, 1, &out);
  EXPECT_EQ(s.code(), Code::kInvalidArgument);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].Text(), "h100:2");
  ASSERT_FALSE(TaskDevices({{"gpu", "any"}}, SlotPool{{}, 4, 1}, 1, &out).ok());
  ASSERT_EQ(out.size(), 1u);
  EXPECT_TRUE(out[0].gpu());
}

}  // namespace
}  // namespace burst
