#include "core/json.h"

#include <gtest/gtest.h>

namespace burst {
namespace {

TEST(FieldReader, ReadsDefaultsAndValues) {
  Json j = Json::parse(R"({"rank": 4, "alpha": 8.5, "on": true, "name": "x"})");
  FieldReader f(j, "lora");
  EXPECT_EQ(f.Int("rank", 1), 4);
  EXPECT_DOUBLE_EQ(f.Number("alpha", 1), 8.5);
  EXPECT_TRUE(f.Bool("on", false));
  EXPECT_EQ(f.String("name", ""), "x");
  EXPECT_EQ(f.Int("missing", 9), 9);
  EXPECT_NO_THROW(f.RejectUnknown());
}

TEST(FieldReader, UnknownFieldIsNamedWithItsPath) {
  Json j = Json::parse(R"({"rank": 4, "rnak": 5})");
  FieldReader f(j, "lora");
  f.Int("rank", 1);
  try {
    f.RejectUnknown();
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.status().param(), "lora.rnak");
    EXPECT_NE(std::string(e.what()).find("unknown field lora.rnak"), std::string::npos);
  }
}

TEST(FieldReader, WrongTypeIsNamed) {
  Json j = Json::parse(R"({"rank": "eight", "lr": 0.5})");
  FieldReader f(j, "");
  try {
    f.Int("rank", 1);
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.status().param(), "rank");
    EXPECT_EQ(e.status().code(), Code::kInvalidArgument);
  }
  EXPECT_THROW(f.Int("lr", 1), Error);  // 0.5 is not an integer
}

TEST(ParseJson, ErrorNamesTheSource) {
  try {
    ParseJson("{\"a\": ", "recipe.json");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("recipe.json"), std::string::npos);
  }
}

}  // namespace
}  // namespace burst
