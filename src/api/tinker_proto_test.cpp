// The tinker protobuf messages against bytes the SDK's own generated module
// produced (tests/fixtures/tinker/README.md): requests decode to what they
// hold, results encode byte for byte as the SDK would.
#include "api/tinker_proto.h"

#include <gtest/gtest.h>

#include <cmath>

#include "core/fs.h"
#include "train/loop_data.h"

namespace burst {
namespace {

std::string Fixture(const std::string& name) {
  return ReadFile(std::filesystem::path(BURST_SOURCE_DIR) / "tests/fixtures/tinker" / name);
}
Json Meta(const std::string& name) { return Json::parse(Fixture(name + ".json")); }

std::string ErrorOf(std::string_view bytes, int64_t max_values = 1 << 20) {
  try {
    DecodeFwdBwdRequest(bytes, max_values);
  } catch (const Error& e) {
    return e.status().message();
  }
  return "";
}

TEST(TinkerProto, DecodesTheSdksForwardBackwardRequest) {
  const Json meta = Meta("fwdbwd_cross_entropy");
  ProtoFwdBwd r = DecodeFwdBwdRequest(Fixture("fwdbwd_cross_entropy.pb"), 1 << 20);
  EXPECT_EQ(r.model_id, meta["model_id"]);
  EXPECT_EQ(r.seq_id, meta["seq_id"]);
  EXPECT_EQ(r.loss_fn, "cross_entropy");
  EXPECT_FALSE(r.forward_only);
  EXPECT_TRUE(r.loss_fn_config.empty());
  // The same checks as a JSON body's.
  auto data = ParseLoopData(r.data, r.loss_fn, {100, 0, 0}, "data");
  ASSERT_EQ(data.size(), 1u);
  EXPECT_EQ(data[0].tokens, meta["data"][0]["tokens"].get<std::vector<int64_t>>());
  EXPECT_EQ(data[0].targets, meta["data"][0]["target_tokens"].get<std::vector<int64_t>>());
  EXPECT_EQ(data[0].inputs.at("weights"), meta["data"][0]["weights"].get<std::vector<float>>());
}

TEST(TinkerProto, DecodesForwardOnlyWithConfigChunksAndTwoDatums) {
  const Json meta = Meta("fwd_ppo_two_datums");
  ProtoFwdBwd r = DecodeFwdBwdRequest(Fixture("fwd_ppo_two_datums.pb"), 1 << 20);
  EXPECT_TRUE(r.forward_only);
  EXPECT_EQ(r.seq_id, 7);
  EXPECT_DOUBLE_EQ(r.loss_fn_config["clip_low_threshold"].get<double>(), 0.9);
  EXPECT_DOUBLE_EQ(r.loss_fn_config["clip_high_threshold"].get<double>(), 1.1);
  auto data = ParseLoopData(r.data, "ppo", {1000, 0, 0}, "data");
  ASSERT_EQ(data.size(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    const Json& m = meta["data"][i];
    EXPECT_EQ(data[i].tokens, m["tokens"].get<std::vector<int64_t>>()) << i;
    EXPECT_EQ(data[i].targets, m["target_tokens"].get<std::vector<int64_t>>()) << i;
    EXPECT_EQ(data[i].inputs.at("logprobs"), m["logprobs"].get<std::vector<float>>()) << i;
    EXPECT_EQ(data[i].inputs.at("advantages"), m["advantages"].get<std::vector<float>>()) << i;
  }
}

// SDK 0.3x writes a loss config twice: numbers in loss_fn_config, numbers
// and text in loss_fn_config_v2, which wins.
TEST(TinkerProto, TakesTheSdksLossConfigV2AndRefusesTextSettings) {
  const Json meta = Meta("fwdbwd_ppo_config_v2");
  const std::string pb = Fixture("fwdbwd_ppo_config_v2.pb");
  ProtoFwdBwd r = DecodeFwdBwdRequest(pb, 1 << 20);
  EXPECT_EQ(r.loss_fn, "ppo");
  EXPECT_EQ(r.loss_fn_config, meta["loss_fn_config"]);
  // A legacy entry that says otherwise, after v2's: v2 still wins.
  std::string entry = "\x0a\x12" + std::string("clip_low_threshold") + "\x11";
  const double other = 0.125;
  entry.append(reinterpret_cast<const char*>(&other), 8);
  const std::string legacy = "\x2a" + std::string(1, static_cast<char>(entry.size())) + entry;
  EXPECT_DOUBLE_EQ(
      DecodeFwdBwdRequest(pb + legacy, 1 << 20).loss_fn_config["clip_low_threshold"].get<double>(), 0.75);
  EXPECT_DOUBLE_EQ(DecodeFwdBwdRequest(legacy, 1 << 20).loss_fn_config["clip_low_threshold"].get<double>(),
                   0.125);
  EXPECT_NE(ErrorOf(Fixture("fwdbwd_ppo_config_v2_text.pb")).find("loss_fn_config_v2.mode: is text"),
            std::string::npos)
      << ErrorOf(Fixture("fwdbwd_ppo_config_v2_text.pb"));
}

TEST(TinkerProto, EncodesResultsByteForByteAsTheSdk) {
  EXPECT_EQ(EncodeFwdBwdOutput(Meta("fwdbwd_output_two_datums")), Fixture("fwdbwd_output_two_datums.pb"));
  EXPECT_EQ(EncodeSampleResponse(Meta("sample_response")), Fixture("sample_response.pb"));
  EXPECT_EQ(EncodeSampleResponse(Meta("sample_response_topk")), Fixture("sample_response_topk.pb"));
}

TEST(TinkerProto, RefusesMalformedAndOversizedBodies) {
  const std::string good = Fixture("fwdbwd_cross_entropy.pb");
  for (size_t cut : {size_t{1}, size_t{5}, good.size() / 2, good.size() - 1}) {
    EXPECT_NE(ErrorOf(std::string_view(good).substr(0, cut)), "") << "cut at " << cut;
  }
  EXPECT_NE(ErrorOf(std::string("\x1a\xff\xff\xff\xff\x0f", 6)).find("runs past"), std::string::npos);
  EXPECT_NE(ErrorOf(std::string("\x7b", 1)).find("groups"), std::string::npos);
  // More numbers than the budget: refused before they are materialised.
  EXPECT_NE(ErrorOf(good, 5).find("more numbers"), std::string::npos);
  // data[0] holding an image chunk: {3: {1: {2: {}}}}.
  EXPECT_NE(ErrorOf(std::string("\x1a\x04\x0a\x02\x12\x00", 6)).find("image chunks are not supported"),
            std::string::npos);
  // Token bytes that are not whole int32s.
  EXPECT_NE(ErrorOf(std::string("\x1a\x07\x0a\x05\x0a\x03\x0a\x01\x01", 9)).find("whole number"),
            std::string::npos);
  EXPECT_EQ(ErrorOf(""), "") << "an empty message is valid protobuf (the checks after it refuse it)";
}

}  // namespace
}  // namespace burst
