#include "core/key_rates.h"

#include <gtest/gtest.h>

namespace burst {
namespace {

// A burst passes, then the average rate; each key has its own bucket; a
// refused request says when to retry; idle keys hold nothing.
TEST(KeyRates, ABurstPassesThenTheRateAndEachKeyHasItsOwn) {
  KeyRates rates(10, 20);
  int64_t now = 1'000'000;
  for (int i = 0; i < 20; ++i) EXPECT_TRUE(rates.Admit("key-a", now).ok()) << i;
  int retry = 0;
  Status refused = rates.Admit("key-a", now, &retry);
  EXPECT_EQ(refused.code(), Code::kResourceExhausted);
  EXPECT_EQ(refused.reason(), "rate_limit");
  EXPECT_EQ(refused.param(), "authorization");
  EXPECT_EQ(retry, 1);
  EXPECT_TRUE(rates.Admit("key-b", now).ok()) << "another key is not held back";
  now += 100;  // a tenth of a second: one more request of key-a
  EXPECT_TRUE(rates.Admit("key-a", now).ok());
  EXPECT_FALSE(rates.Admit("key-a", now).ok());
  int passed = 0;
  for (int ms = 0; ms < 10'000; ms += 10) passed += rates.Admit("key-a", now + ms).ok();
  EXPECT_NEAR(passed, 100, 2) << "10 a second on average over 10 s";
  EXPECT_EQ(rates.keys(), 1u) << "key-b, idle past its refill time (2 s), was let go";
  EXPECT_TRUE(rates.Admit("key-c", now + 60'000).ok());
  EXPECT_EQ(rates.keys(), 1u) << "and key-a once idle too";
}

}  // namespace
}  // namespace burst
