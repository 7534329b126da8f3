// Secrets compared (core/ids.h): equal only when every byte and the length
// match.
#include "core/ids.h"

#include <gtest/gtest.h>

namespace burst {
namespace {

TEST(SameSecret, EqualOnlyWhenEveryByteAndTheLengthMatch) {
  const std::string token = NewSecret("tok");
  EXPECT_TRUE(SameSecret(token, token));
  EXPECT_TRUE(SameSecret(std::string(token), token));
  std::string last = token;
  last.back() = last.back() == 'a' ? 'b' : 'a';
  EXPECT_FALSE(SameSecret(last, token)) << "the same length, the last byte differs";
  std::string first = token;
  first[0] = 'x';
  EXPECT_FALSE(SameSecret(first, token));
  EXPECT_FALSE(SameSecret(token.substr(0, token.size() - 1), token)) << "a prefix";
  EXPECT_FALSE(SameSecret(token + "a", token)) << "longer";
  EXPECT_FALSE(SameSecret("", token));
  EXPECT_FALSE(SameSecret(token, ""));
  EXPECT_FALSE(SameSecret(std::string("ab\0c", 4), std::string("ab\0d", 4))) << "bytes after a NUL count";
  EXPECT_TRUE(SameSecret("", ""));
}

}  // namespace
}  // namespace burst
