// What newer tinker SDKs send beside the 0.25.0 protocol: the fields Burst
// takes at their "off" values and refuses by name otherwise, the optimizer
// families, and the run ids the SDK derives itself.
#include "api/tinker_wire.h"

#include <gtest/gtest.h>

namespace burst {
namespace {

template <typename F>
Status ThrownBy(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.status();
  }
  return Status();
}

Json Sample(const Json& extra) {
  Json body = {{"num_samples", 2}, {"prompt", Json::object()}, {"base_model", "burst-small"}};
  body.update(extra);
  return body;
}

TEST(TinkerWire, NewerSampleFieldsAreTakenOffAndRefusedByNameOn) {
  // As SDK 0.38 sends a plain sample: every new option at its default.
  const Json plain = Sample({{"topk_sample_logprobs", 0},
                             {"prompt_alt_tokens_k", 0},
                             {"target_prompt_logprobs", nullptr},
                             {"prompt_logprobs_last_n", nullptr},
                             {"record_stability_info", false}});
  EXPECT_TRUE(ThrownBy([&] { ParseSampleOp(plain); }).ok());
  for (const auto& item :
       std::vector<std::pair<std::string, Json>>{{"topk_sample_logprobs", 2},
                                                 {"prompt_alt_tokens_k", 1},
                                                 {"target_prompt_logprobs", Json::object()},
                                                 {"prompt_logprobs_last_n", 3},
                                                 {"record_stability_info", true}}) {
    const Status s = ThrownBy([&] { ParseSampleOp(Sample({{item.first, item.second}})); });
    EXPECT_EQ(s.param(), item.first);
    EXPECT_NE(s.message().find("not available in Burst"), std::string::npos) << s.message();
  }
}

TEST(TinkerWire, AdamwIsTheOnlyOptimizer) {
  CheckOptimizerConfig(Json());
  CheckOptimizerConfig({{"type", "adamw"}});
  EXPECT_EQ(ThrownBy([] {
              CheckOptimizerConfig({{"type", "dimuon"}, {"version", 1}});
            }).param(),
            "optimizer_config.type");
  EXPECT_EQ(ThrownBy([] {
              CheckOptimizerConfig({{"type", "adamw"}, {"lr", 1}});
            }).param(),
            "optimizer_config.lr");
  EXPECT_EQ(ThrownBy([] { CheckOptimizerConfig("adamw"); }).param(), "optimizer_config");
  RefuseOptimizerParams(Json());
  EXPECT_EQ(ThrownBy([] {
              RefuseOptimizerParams({{"type", "dimuon"}, {"learning_rate", 0.1}});
            }).param(),
            "optimizer_params");
}

TEST(TinkerWire, TheSdksDerivedRunIdsAreBurstsOwn) {
  EXPECT_EQ(CanonicalRunId("sess-abc:train:3"), "sess-abc-train-3");
  EXPECT_EQ(CanonicalRunId("sess-abc-train-3"), "sess-abc-train-3");
  EXPECT_EQ(ParseTinkerPath("tinker://sess-abc:train:0/weights/s1", "path").run, "sess-abc-train-0");
}

}  // namespace
}  // namespace burst
