#include "core/json.h"
#include "core/utf8.h"

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

TEST(ParseJson, RefusesValuesNestedPastTheLimit) {
  // 60,000 levels: copying such a value recursed once per level and
  // overflowed the stack; it is refused before it is built.
  const std::string deep = std::string(60000, '[') + std::string(60000, ']');
  try {
    ParseJson(deep, "body");
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.status().code(), Code::kInvalidArgument);
    EXPECT_EQ(e.status().param(), "body");
    EXPECT_NE(e.status().message().find("limit of 64 levels"), std::string::npos) << e.status().message();
  }
  const std::string objects = R"({"user":)" + std::string(100, '{') + std::string(100, '}') + "}";
  EXPECT_FALSE(TryParseJson(objects, "body").ok());
  // Exactly at the limit is fine; brackets inside strings do not count.
  const std::string at_limit = std::string(kMaxJsonDepth, '[') + std::string(kMaxJsonDepth, ']');
  EXPECT_TRUE(TryParseJson(at_limit, "body").ok());
  EXPECT_EQ(JsonDepthExceededAt(at_limit), std::nullopt);
  EXPECT_EQ(JsonDepthExceededAt("[" + std::string(kMaxJsonDepth, '[')), size_t{kMaxJsonDepth});
  const std::string in_string = R"({"a": ")" + std::string(1000, '[') + R"(\" [[["})";
  EXPECT_TRUE(TryParseJson(in_string, "body").ok()) << in_string;
}

TEST(ParseJson, ErrorsQuotingInvalidUtf8StayValidUtf8) {
  auto r = TryParseJson("{\"a\": \"\xff\xfe\"}", "data.jsonl:3");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().param(), "data.jsonl:3");
  EXPECT_TRUE(IsValidUtf8(r.status().message())) << r.status().message();
  const Json body = {{"message", r.status().message()}};
  EXPECT_NO_THROW(body.dump());
}

TEST(Utf8, ValidatesAndRepairs) {
  EXPECT_TRUE(IsValidUtf8("plain ascii"));
  EXPECT_TRUE(IsValidUtf8("caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80"));
  EXPECT_EQ(InvalidUtf8At("ok\xff\xfe"), size_t{2});
  EXPECT_FALSE(IsValidUtf8("\xc0\xaf"));          // overlong '/'
  EXPECT_FALSE(IsValidUtf8("\xed\xa0\x80"));      // a surrogate
  EXPECT_FALSE(IsValidUtf8("\xf4\x90\x80\x80"));  // past U+10FFFF
  EXPECT_FALSE(IsValidUtf8("\xe2\x82"));          // cut short
  EXPECT_EQ(ToValidUtf8("a\xff" "b"), "a\xef\xbf\xbd" "b");
  EXPECT_TRUE(IsValidUtf8(ToValidUtf8("\xff\xfe\xc3")));
}

TEST(JsonPreview, CutsLongValues) {
  EXPECT_EQ(JsonPreview(Json("short")), "\"short\"");
  const std::string p = JsonPreview(Json(std::string(10000, 'x')), 20);
  EXPECT_EQ(p.size(), 23u);
  EXPECT_EQ(p.substr(20), "...");
}

}  // namespace
}  // namespace burst
