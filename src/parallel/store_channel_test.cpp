// Tests of the storage channel (store_channel.h): N members (threads here,
// on mem:// and on file://) end each step with the same vector, bit for bit,
// the sum of theirs in rank order; old steps' files go; a member that never
// writes fails the others in time, naming it; disagreeing sizes and
// bad options are refused.
#include "parallel/store_channel.h"

#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <random>
#include <thread>

namespace burst {
namespace {

std::vector<float> Random(size_t n, uint32_t seed) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = dist(gen);
  return v;
}

// Each member's vector at each step: Random(n, 100 * step + rank).
std::vector<float> Input(size_t n, int64_t step, int rank) {
  return Random(n, static_cast<uint32_t>(100 * step + rank));
}

// Runs `size` members for `steps` steps; returns each member's vectors after each step.
std::vector<std::vector<std::vector<float>>> RunMembers(ObjectStore* store, int size, size_t n,
                                                        int64_t steps) {
  std::vector<std::vector<std::vector<float>>> out(static_cast<size_t>(size));
  std::vector<std::thread> threads;
  for (int rank = 0; rank < size; ++rank) {
    threads.emplace_back([&, rank] {
      auto ch = StoreChannel::Open(store, {"orgs/o/jobs/j/channel/", rank, size, 20'000});
      ASSERT_TRUE(ch.ok()) << ch.status().ToString();
      for (int64_t step = 0; step < steps; ++step) {
        std::vector<float> v = Input(n, step, rank);
        Status s = ch.value().AllReduceSum(v);
        ASSERT_TRUE(s.ok()) << s.ToString();
        out[static_cast<size_t>(rank)].push_back(v);
      }
    });
  }
  for (auto& t : threads) t.join();
  return out;
}

void ExpectSums(const std::vector<std::vector<std::vector<float>>>& out, int size, size_t n, int64_t steps) {
  for (int64_t step = 0; step < steps; ++step) {
    std::vector<float> want(n, 0.0f);  // in rank order, float32: the channel's own order
    for (int r = 0; r < size; ++r) {
      const std::vector<float> in = Input(n, step, r);
      for (size_t i = 0; i < n; ++i) want[i] += in[i];
    }
    for (int r = 0; r < size; ++r) {
      const std::vector<float>& got = out[static_cast<size_t>(r)][static_cast<size_t>(step)];
      ASSERT_EQ(got.size(), n);
      EXPECT_EQ(std::memcmp(got.data(), want.data(), n * sizeof(float)), 0)
          << "rank " << r << " step " << step;
    }
  }
}

TEST(StoreChannel, MembersEndWithTheSameSumBitForBit) {
  auto store = NewMemStore();
  for (int size : {2, 3, 5}) {
    for (size_t n : {size_t{1}, size_t{10}, size_t{1000}}) {  // fewer elements than members too
      const std::string scope = "size " + std::to_string(size) + " n " + std::to_string(n);
      SCOPED_TRACE(scope);
      ASSERT_TRUE(store->DeletePrefix("orgs/").ok());
      auto out = RunMembers(store.get(), size, n, 4);
      ExpectSums(out, size, n, 4);
    }
  }
}

TEST(StoreChannel, WorksOnAFolderAndKeepsOnlyTheLastTwoSteps) {
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("burst-channel-" + std::to_string(std::random_device{}()));
  auto store = NewFileStore(dir);
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  auto out = RunMembers(store.value().get(), 4, 257, 5);
  ExpectSums(out, 4, 257, 5);
  auto left = store.value()->List("orgs/o/jobs/j/channel/");
  ASSERT_TRUE(left.ok());
  for (const ObjectInfo& o : left.value()) {
    const bool last_two = o.key.find("/step-00000003/") != std::string::npos ||
                          o.key.find("/step-00000004/") != std::string::npos;
    EXPECT_TRUE(last_two) << o.key << " outlived its step";
  }
  EXPECT_FALSE(left.value().empty());
  std::filesystem::remove_all(dir);
}

TEST(StoreChannel, OneMemberAloneTouchesNothing) {
  auto store = NewMemStore();
  auto ch = StoreChannel::Open(store.get(), {"c/", 0, 1, 1000});
  ASSERT_TRUE(ch.ok());
  std::vector<float> v = {1.5f, -2.0f};
  ASSERT_TRUE(ch.value().AllReduceSum(v).ok());
  EXPECT_EQ(v, (std::vector<float>{1.5f, -2.0f}));
  EXPECT_TRUE(store->List("").value().empty());
}

TEST(StoreChannel, AMemberThatNeverWritesFailsTheOthersNamingIt) {
  auto store = NewMemStore();
  auto ch = StoreChannel::Open(store.get(), {"c/", 0, 3, 50});
  ASSERT_TRUE(ch.ok());
  std::vector<float> v(9, 1.0f);
  Status s = ch.value().AllReduceSum(v);
  EXPECT_EQ(s.code(), Code::kUnavailable) << s.ToString();
  EXPECT_NE(s.message().find("rank 1"), std::string::npos) << s.ToString();
  EXPECT_NE(s.message().find("step 0"), std::string::npos) << s.ToString();
}

// A member whose attempt ended elsewhere stops waiting at once, long
// before its timeout.
TEST(StoreChannel, AbortStopsTheWaitAtOnce) {
  auto store = NewMemStore();
  int polls = 0;
  auto ch = StoreChannel::Open(store.get(), {"c/", 0, 2, 600'000});
  ASSERT_TRUE(ch.ok());
  ch.value().set_abort([&] { return ++polls >= 3; });
  std::vector<float> v(4, 1.0f);
  Status s = ch.value().AllReduceSum(v);
  EXPECT_EQ(s.code(), Code::kCancelled) << s.ToString();
  EXPECT_EQ(polls, 3);
  EXPECT_NE(s.message().find("rank 1"), std::string::npos) << s.ToString();
}

TEST(StoreChannel, MembersThatDisagreeOnTheSizeAreRefused) {
  auto store = NewMemStore();
  Status s0, s1;
  std::thread a([&] {
    auto ch = StoreChannel::Open(store.get(), {"c/", 0, 2, 2000});
    std::vector<float> v(10, 1.0f);
    s0 = ch.value().AllReduceSum(v);
  });
  std::thread b([&] {
    auto ch = StoreChannel::Open(store.get(), {"c/", 1, 2, 2000});
    std::vector<float> v(12, 1.0f);
    s1 = ch.value().AllReduceSum(v);
  });
  a.join();
  b.join();
  EXPECT_EQ(s0.code(), Code::kFailedPrecondition) << s0.ToString();
  EXPECT_EQ(s1.code(), Code::kFailedPrecondition) << s1.ToString();
}

TEST(StoreChannel, RefusesBadOptions) {
  auto store = NewMemStore();
  EXPECT_EQ(StoreChannel::Open(store.get(), {"c", 0, 2, 1000}).status().param(), "prefix");
  EXPECT_EQ(StoreChannel::Open(store.get(), {"../c/", 0, 2, 1000}).status().param(), "prefix");
  EXPECT_EQ(StoreChannel::Open(store.get(), {"c/", 2, 2, 1000}).status().param(), "rank");
  EXPECT_EQ(StoreChannel::Open(store.get(), {"c/", 0, 0, 1000}).status().param(), "size");
  EXPECT_EQ(StoreChannel::Open(nullptr, {"c/", 0, 1, 1000}).status().param(), "store");
  EXPECT_EQ(StoreChannel::Open(store.get(), {"c/", 0, 1, 0}).status().param(), "timeout_ms");
}

}  // namespace
}  // namespace burst
