#include "runtime/worker_tokens.h"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

namespace burst {
namespace {

TEST(WorkerTokens, FindsWhatWasAddedUntilItIsRemoved) {
  WorkerTokens tokens;
  EXPECT_FALSE(tokens.Find("h1").has_value());
  tokens.Add("h1", "wrk-1");
  tokens.Add("h2", "wrk-2");
  EXPECT_EQ(tokens.Find("h1").value_or(""), "wrk-1");
  EXPECT_EQ(tokens.Find("h2").value_or(""), "wrk-2");
  tokens.Remove("h1");
  EXPECT_FALSE(tokens.Find("h1").has_value());
  EXPECT_EQ(tokens.Find("h2").value_or(""), "wrk-2");
}

// Readers on many threads while workers come and go (ThreadSanitizer runs
// this): a token is found as its worker's or not at all. Each side does a
// fixed number of operations: a reader-preferring lock may hold the writer
// off while readers spin, so neither side waits for the other to finish.
TEST(WorkerTokens, ReadersAndWritersAtOnce) {
  WorkerTokens tokens;
  tokens.Add("stays", "wrk-0");
  std::atomic<int64_t> wrong{0};
  std::vector<std::thread> readers;
  for (int i = 0; i < 4; ++i) {
    readers.emplace_back([&] {
      for (int n = 0; n < 5000; ++n) {
        if (tokens.Find("stays").value_or("") != "wrk-0") ++wrong;
        auto churn = tokens.Find("churn");
        if (churn && *churn != "wrk-1") ++wrong;
      }
    });
  }
  std::thread writer([&] {
    for (int i = 0; i < 2000; ++i) {
      tokens.Add("churn", "wrk-1");
      tokens.Remove("churn");
    }
  });
  writer.join();
  for (auto& t : readers) t.join();
  EXPECT_EQ(wrong.load(), 0);
  EXPECT_FALSE(tokens.Find("churn").has_value());
}

}  // namespace
}  // namespace burst
