#include "core/json.h"

#include <gtest/gtest.h>

#include <climits>

#include "core/utf8.h"

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

// Found by fuzz/json_fuzz: Int converted any integral double to long long,
// undefined beyond 2^63 (2.5e21); unsigned values above 2^63 wrapped negative.
TEST(FieldReader, IntegersBeyond64BitsAreRefused) {
  Json j = Json::parse(R"({"a": 2.52922e21, "b": -1e19, "c": 18446744073709551615,
                           "d": 9223372036854775807, "e": -9223372036854775808, "f": 4.0e18, "g": -3.0})");
  FieldReader f(j, "opt");
  for (const char* key : {"a", "b", "c"}) {
    SCOPED_TRACE(key);
    try {
      f.Int(key, 0);
      ADD_FAILURE() << "accepted";
    } catch (const Error& e) {
      EXPECT_EQ(e.status().param(), std::string("opt.") + key);
      EXPECT_NE(std::string(e.what()).find("within 64 bits"), std::string::npos) << e.what();
    }
  }
  EXPECT_EQ(f.Int("d", 0), LLONG_MAX);
  EXPECT_EQ(f.Int("e", 0), LLONG_MIN);
  EXPECT_EQ(f.Int("f", 0), 4000000000000000000LL);
  EXPECT_EQ(f.Int("g", 0), -3);
}

TEST(ParseJson, ErrorNamesTheSource) {
  try {
    ParseJson("{\"a\": ", "recipe.json");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("recipe.json"), std::string::npos);
  }
}

// Found by fuzz/json_fuzz: nlohmann reports a number beyond a double's range
// as out_of_range, not parse_error, and ParseJson let it escape.
TEST(ParseJson, NumberTooLargeForADoubleIsInvalidArgument) {
  for (const char* text : {"1e400", "{\"lr\": -11e308}", "[92233721e3084775]"}) {
    SCOPED_TRACE(text);
    try {
      ParseJson(text, "body");
      ADD_FAILURE() << "parsed";
    } catch (const Error& e) {
      EXPECT_EQ(e.status().code(), Code::kInvalidArgument);
      EXPECT_EQ(e.status().param(), "body");
      EXPECT_NE(std::string(e.what()).find("number overflow"), std::string::npos) << e.what();
    }
  }
  EXPECT_FALSE(TryParseJson("1e400", "body").ok());
  EXPECT_DOUBLE_EQ(ParseJson("1e308", "body").get<double>(), 1e308);
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
  EXPECT_EQ(ToValidUtf8("a\xff"
                        "b"),
            "a\xef\xbf\xbd"
            "b");
  EXPECT_TRUE(IsValidUtf8(ToValidUtf8("\xff\xfe\xc3")));
}

TEST(JsonPreview, CutsLongValues) {
  EXPECT_EQ(JsonPreview(Json("short")), "\"short\"");
  const std::string p = JsonPreview(Json(std::string(10000, 'x')), 20);
  EXPECT_EQ(p.size(), 23u);
  EXPECT_EQ(p.substr(20), "...");
}

TEST(StatusJson, RoundTripsCodesReasonsAndParams) {
  for (const Status& s : {Status(Code::kInvalidArgument, "lora.rank: must be positive", "lora.rank"),
                          Status(Code::kResourceExhausted, "over the cap", "max_active_jobs", "org_cap"),
                          Status(Code::kResourceExhausted, "no worker", "", "capacity"),
                          Status(Code::kFailedPrecondition, "not yours", "attempt", "lease_lost"),
                          Status(Code::kUnauthenticated, "no key", "authorization"),
                          Status(Code::kCancelled, "the caller went away")}) {
    const Json j = StatusJson(s);
    const Status back = StatusFromJson(j);
    EXPECT_EQ(back.code(), s.code()) << j.dump();
    EXPECT_EQ(back.reason(), s.reason()) << j.dump();
    EXPECT_EQ(back.message(), s.message());
    EXPECT_EQ(back.param(), s.param());
  }
  EXPECT_EQ(StatusJson(Status(Code::kResourceExhausted, "x", "max_deployments", "org_cap"))["code"],
            "org_cap");
  EXPECT_TRUE(StatusJson(Status(Code::kNotFound, "gone"))["param"].is_null());
  // Not Burst's shape: the HTTP status decides; an error is never ok.
  EXPECT_EQ(StatusFromJson(Json(), 401).code(), Code::kUnauthenticated);
  EXPECT_EQ(StatusFromJson(Json("proxy page"), 502).code(), Code::kUnavailable);
  EXPECT_EQ(StatusFromJson({{"code", "ok"}, {"message", 5}}).code(), Code::kInternal);
}

}  // namespace
}  // namespace burst
