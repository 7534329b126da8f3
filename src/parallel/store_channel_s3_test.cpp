// The storage channel (store_channel.h) on s3://, against a real radosgw
// started here (tests/s3/s3-up.sh): 3 members (threads) end 3 steps with
// the same sums, bit for bit, as on mem:// and file://, and old steps go.
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <thread>

#include "core/ids.h"
#include "parallel/store_channel.h"
#include "store/s3_test_env.h"

namespace burst {
namespace {

const auto* const kEnv = ::testing::AddGlobalTestEnvironment(new S3TestEnvironment);

std::vector<float> Input(size_t n, int64_t step, int rank) {
  std::mt19937 gen(static_cast<uint32_t>(100 * step + rank));
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = dist(gen);
  return v;
}

TEST(StoreChannelOnS3, MembersEndWithTheSameSumBitForBit) {
  auto opened = OpenObjectStore(std::getenv("BURST_TEST_S3_URL"));
  ASSERT_TRUE(opened.ok()) << opened.status().ToString();
  ObjectStore* store = opened.value().get();
  const std::string prefix = "channels/" + NewId("ch") + "/";
  constexpr int kSize = 3;
  constexpr size_t kN = 4099;
  constexpr int64_t kSteps = 3;
  std::vector<std::vector<std::vector<float>>> out(kSize);
  std::vector<Status> status(kSize);
  std::vector<std::thread> threads;
  for (int rank = 0; rank < kSize; ++rank) {
    threads.emplace_back([&, rank] {
      auto ch = StoreChannel::Open(store, {prefix, rank, kSize, 60'000});
      if (!ch.ok()) {
        status[rank] = ch.status();
        return;
      }
      for (int64_t step = 0; step < kSteps && status[rank].ok(); ++step) {
        std::vector<float> v = Input(kN, step, rank);
        status[rank] = ch.value().AllReduceSum(v);
        out[rank].push_back(std::move(v));
      }
    });
  }
  for (auto& t : threads) t.join();
  for (int64_t step = 0; step < kSteps; ++step) {
    std::vector<float> want(kN, 0.0f);
    for (int r = 0; r < kSize; ++r) {
      const std::vector<float> in = Input(kN, step, r);
      for (size_t i = 0; i < kN; ++i) want[i] += in[i];
    }
    for (int r = 0; r < kSize; ++r) {
      ASSERT_TRUE(status[r].ok()) << "rank " << r << ": " << status[r].ToString();
      const std::vector<float>& got = out[r][static_cast<size_t>(step)];
      // Bit for bit, not by value: the exchange must not change a bit.
      // NOLINTNEXTLINE(bugprone-suspicious-memory-comparison)
      EXPECT_EQ(std::memcmp(got.data(), want.data(), kN * sizeof(float)), 0)
          << "rank " << r << " step " << step;
    }
  }
  auto left = store->List(prefix);
  ASSERT_TRUE(left.ok()) << left.status().ToString();
  for (const ObjectInfo& o : left.value()) {
    EXPECT_EQ(o.key.find(prefix + "step-00000000/"), std::string::npos) << o.key << " outlived its step";
  }
  ASSERT_TRUE(store->DeletePrefix(prefix).ok());
}

}  // namespace
}  // namespace burst
