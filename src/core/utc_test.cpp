#include "core/utc.h"

#include <gtest/gtest.h>

#include <regex>

namespace burst {
namespace {

TEST(Utc, FormatsASecondInEachOfBurstsFormats) {
  const int64_t t = 1796583600;  // 2026-12-06 19:00:00 UTC
  EXPECT_EQ(FormatUtc(t, kUtcIso8601), "2026-12-06T19:00:00Z");
  EXPECT_EQ(FormatUtc(t, kUtcSql), "2026-12-06 19:00:00");
  EXPECT_EQ(FormatUtc(t, "%Y%m%dT%H%M%SZ"), "20261206T190000Z");  // S3's x-amz-date
  EXPECT_EQ(FormatUtc(0, "%Y-%m-%d"), "1970-01-01");
  EXPECT_EQ(FormatUtc(t, "%d %b %Y"), "06 Dec 2026");
}

TEST(Utc, NowIsTodayInTheFormatAsked) {
  EXPECT_TRUE(std::regex_match(UtcNow(kUtcIso8601), std::regex(R"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ)")));
  EXPECT_TRUE(std::regex_match(UtcNow(kUtcSql), std::regex(R"(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d)")));
}

}  // namespace
}  // namespace burst
