// Parsing a training loop's datums: what each loss takes, and errors that
// name the field.
#include "train/loop_data.h"

#include <gtest/gtest.h>

namespace burst {
namespace {

Json Td(const Json& data, const std::string& dtype) {
  return {{"data", data}, {"dtype", dtype}, {"shape", {data.size()}}};
}

Json Datum(const Json& tokens, const Json& inputs) {
  return {{"model_input", {{"chunks", {{{"tokens", tokens}, {"type", "encoded_text"}}}}}},
          {"loss_fn_inputs", inputs}};
}

std::string ErrorOf(const Json& data, const std::string& loss, const LoopDataLimits& limits = {100, 8, 0}) {
  try {
    ParseLoopData(data, loss, limits, "data");
  } catch (const Error& e) {
    return e.status().param() + " | " + e.status().message();
  }
  return "";
}

TEST(LoopData, CrossEntropyTakesTargetsAndWeightsDefaultingToOne) {
  Json d = Json::array({Datum({1, 2, 3}, {{"target_tokens", Td({2, 3, 4}, "int64")}})});
  auto out = ParseLoopData(d, "cross_entropy", {100, 8, 0}, "data");
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].tokens, (std::vector<int64_t>{1, 2, 3}));
  EXPECT_EQ(out[0].targets, (std::vector<int64_t>{2, 3, 4}));
  EXPECT_EQ(out[0].inputs.at("weights"), (std::vector<float>{1, 1, 1}));
}

TEST(LoopData, ChunksJoinAndRlLossesNeedLogprobsAndAdvantages) {
  Json d = Json::array(
      {{{"model_input", {{"chunks", {{{"tokens", {1}}}, {{"tokens", {2, 3}}, {"type", "encoded_text"}}}}}},
        {"loss_fn_inputs",
         {{"target_tokens", Td({2, 3, 4}, "int64")},
          {"logprobs", Td({0, -1, -2}, "float32")},
          {"advantages", Td({0, 1, 1}, "float32")},
          {"clip_low_threshold", Td({0.9, 0.9, 0.9}, "float32")}}}}});
  auto out = ParseLoopData(d, "ppo", {100, 8, 0}, "data");
  EXPECT_EQ(out[0].tokens.size(), 3u);
  EXPECT_EQ(out[0].inputs.at("advantages")[1], 1.0f);
  EXPECT_NE(ErrorOf(d, "importance_sampling").find("clip_low_threshold"), std::string::npos)
      << "importance_sampling takes no clip thresholds";
  Json no_adv =
      Json::array({Datum({1}, {{"target_tokens", Td({2}, "int64")}, {"logprobs", Td({0}, "float32")}})});
  EXPECT_NE(ErrorOf(no_adv, "dro").find("data[0].loss_fn_inputs.advantages"), std::string::npos);
}

TEST(LoopData, ErrorsNameTheField) {
  EXPECT_NE(ErrorOf(Json::array({Datum({1, 200}, {{"target_tokens", Td({2, 3}, "int64")}})}), "cross_entropy")
                .find("data[0].model_input.chunks[0].tokens[1]"),
            std::string::npos);
  EXPECT_NE(ErrorOf(Json::array({Datum({1, 2}, {{"target_tokens", Td({2}, "int64")}})}), "cross_entropy")
                .find("model input has 2"),
            std::string::npos);
  EXPECT_NE(
      ErrorOf(Json::array({Datum({1, 2}, {{"target_tokens", Td({2, 1.5}, "float32")}})}), "cross_entropy")
          .find("target_tokens.data[1]"),
      std::string::npos);
  EXPECT_NE(ErrorOf(Json::array({Datum({1, 2, 3, 4, 5, 6, 7, 8, 9},
                                       {{"target_tokens", Td({1, 1, 1, 1, 1, 1, 1, 1, 1}, "int64")}})}),
                    "cross_entropy")
                .find("max_seq_len of 8"),
            std::string::npos);
  EXPECT_NE(
      ErrorOf(
          Json::array({Datum({1}, {{"target_tokens", Td({1}, "int64")}, {"weights", Td({"x"}, "float32")}})}),
          "cross_entropy")
          .find("weights.data[0]"),
      std::string::npos);
  EXPECT_NE(ErrorOf(Json::array(), "cross_entropy").find("at least one"), std::string::npos);
  EXPECT_NE(ErrorOf(Json::array({Datum({1}, {{"target_tokens", Td({1}, "int64")}})}), "dpo")
                .find("unknown loss_fn"),
            std::string::npos);
  Json image =
      Json::array({{{"model_input", {{"chunks", {{{"type", "image"}, {"data", "AAAA"}, {"format", "png"}}}}}},
                    {"loss_fn_inputs", {{"target_tokens", Td({1}, "int64")}}}}});
  EXPECT_NE(ErrorOf(image, "cross_entropy").find("not supported"), std::string::npos);
  Json sparse = Json::array({Datum(
      {1}, {{"target_tokens", {{"data", {1}}, {"dtype", "int64"}, {"sparse_crow_indices", {0, 1}}}}})});
  EXPECT_NE(ErrorOf(sparse, "cross_entropy").find("sparse"), std::string::npos);
  // The total over the request is bounded too.
  Json two = Json::array({Datum({1, 2}, {{"target_tokens", Td({1, 1}, "int64")}}),
                          Datum({1, 2}, {{"target_tokens", Td({1, 1}, "int64")}})});
  EXPECT_NE(ErrorOf(two, "cross_entropy", {100, 8, 3}).find("more than 3 tokens"), std::string::npos);
}

TEST(LoopData, LossConfigFillsDefaultsAndRejectsUnknownKeys) {
  auto ppo = ParseLossConfig("ppo", Json(), "c");
  EXPECT_EQ(ppo.at("clip_low_threshold"), 0.8);
  EXPECT_EQ(ppo.at("clip_high_threshold"), 1.2);
  EXPECT_EQ(ParseLossConfig("dro", {{"beta", 0.5}}, "c").at("beta"), 0.5);
  EXPECT_THROW(ParseLossConfig("ppo", {{"clip_low", 0.8}}, "c"), Error);
  EXPECT_THROW(ParseLossConfig("cross_entropy", {{"beta", 1}}, "c"), Error);
  EXPECT_THROW(ParseLossConfig("ppo", {{"clip_low_threshold", 1.5}}, "c"), Error);
}

}  // namespace
}  // namespace burst
