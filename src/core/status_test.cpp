#include "core/status.h"

#include <gtest/gtest.h>

#include <stdexcept>

namespace burst {
namespace {

TEST(Status, OkByDefaultAndCarriesCodeMessageParam) {
  EXPECT_TRUE(Status().ok());
  Status s(Code::kInvalidArgument, "lora.rank must be positive", "lora.rank");
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(s.code(), Code::kInvalidArgument);
  EXPECT_EQ(s.param(), "lora.rank");
  EXPECT_EQ(s.ToString(), "lora.rank must be positive [invalid_argument]");
  EXPECT_EQ(Status(Code::kNotFound, "gone", "x.json").ToString(), "x.json: gone [not_found]");
}

TEST(Status, ResultHoldsValueOrStatus) {
  Result<int> good(7);
  ASSERT_TRUE(good.ok());
  EXPECT_EQ(good.value(), 7);
  Result<int> bad(Status(Code::kDataLoss, "corrupt"));
  EXPECT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), Code::kDataLoss);
  EXPECT_THROW(bad.ValueOrThrow(), Error);
}

TEST(Status, TryTurnsExceptionsIntoStatus) {
  EXPECT_TRUE(Try([] {}).ok());
  Status s = Try([] { throw Error(Code::kNotFound, "no model", "model"); });
  EXPECT_EQ(s.code(), Code::kNotFound);
  EXPECT_EQ(s.param(), "model");
  s = Try([] { throw std::runtime_error("boom\nException raised from foo"); });
  EXPECT_EQ(s.code(), Code::kInternal);
  EXPECT_EQ(s.message(), "boom");
}

TEST(Status, CodeNamesAreStable) {
  EXPECT_STREQ(CodeName(Code::kInvalidArgument), "invalid_argument");
  EXPECT_STREQ(CodeName(Code::kFailedPrecondition), "failed_precondition");
  EXPECT_STREQ(CodeName(Code::kResourceExhausted), "resource_exhausted");
}

TEST(Status, CodeFromNameInvertsCodeName) {
  for (int c = static_cast<int>(Code::kOk); c <= static_cast<int>(Code::kInternal); ++c) {
    Code code = static_cast<Code>(c);
    EXPECT_EQ(CodeFromName(CodeName(code)), code) << CodeName(code);
  }
  EXPECT_EQ(CodeFromName("unauthenticated"), Code::kUnauthenticated);
  EXPECT_EQ(CodeFromName("capacity"), std::nullopt);  // a reason, not a code
  EXPECT_EQ(CodeFromName(""), std::nullopt);
}

TEST(Status, ReasonIsItsOwnField) {
  Status s(Code::kResourceExhausted, "over the organisation's limit", "max_active_jobs", "org_cap");
  EXPECT_EQ(s.param(), "max_active_jobs");
  EXPECT_EQ(s.reason(), "org_cap");
  EXPECT_EQ(Status(Code::kNotFound, "gone").reason(), "");
}

}  // namespace
}  // namespace burst
