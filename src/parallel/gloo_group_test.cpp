// Tests of the c10d Gloo group (gloo_group.h): members (threads here) that
// meet through rank 0's rendezvous sum their tensors, each getting the same
// values; a member that never comes, or leaves, fails the others within
// the timeout;
// bad addresses and options are refused before any connection.
#include "parallel/gloo_group.h"

#include <gtest/gtest.h>

#include <thread>

namespace burst {
namespace {

TEST(GlooGroup, MembersSumTheirTensors) {
  const int size = 3;
  GlooOptions o0;
  o0.size = size;
  o0.timeout_ms = 30'000;
  auto root = GlooGroup::Listen(o0);
  ASSERT_TRUE(root.ok()) << root.status().ToString();
  const std::string address = root.value()->address();
  ASSERT_EQ(address.rfind("127.0.0.1:", 0), 0u) << address;
  std::vector<torch::Tensor> got(size);
  std::vector<Status> status(size);
  std::vector<std::thread> threads;
  for (int rank = 0; rank < size; ++rank) {
    threads.emplace_back([&, rank] {
      std::unique_ptr<GlooGroup> mine;
      GlooGroup* g = root.value().get();
      if (rank > 0) {
        GlooOptions o = o0;
        o.rank = rank;
        auto j = GlooGroup::Join(address, o);
        if (!j.ok()) {
          status[rank] = j.status();
          return;
        }
        mine = std::move(j.value());
        g = mine.get();
      }
      if (status[rank] = g->Connect(); !status[rank].ok()) return;
      torch::Tensor t = torch::arange(1000, torch::kFloat32) * static_cast<float>(rank + 1);
      status[rank] = g->AllReduceSum(t);
      got[rank] = t;
    });
  }
  for (auto& t : threads) t.join();
  const torch::Tensor want = torch::arange(1000, torch::kFloat32) * 6.0f;  // 1 + 2 + 3
  for (int rank = 0; rank < size; ++rank) {
    ASSERT_TRUE(status[rank].ok()) << "rank " << rank << ": " << status[rank].ToString();
    EXPECT_TRUE(torch::equal(got[rank], want)) << "rank " << rank;
  }
}

TEST(GlooGroup, AMemberThatNeverComesFailsTheOthersInTime) {
  GlooOptions o;
  o.size = 2;
  o.timeout_ms = 1500;
  auto root = GlooGroup::Listen(o);
  ASSERT_TRUE(root.ok()) << root.status().ToString();
  const auto t0 = std::chrono::steady_clock::now();
  Status s = root.value()->Connect();
  EXPECT_EQ(s.code(), Code::kUnavailable) << s.ToString();
  EXPECT_NE(s.message().find("waiting for the 2 members"), std::string::npos) << s.ToString();
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(60));
}

TEST(GlooGroup, AMemberThatLeavesFailsTheNextCollectiveInTime) {
  GlooOptions o;
  o.size = 2;
  o.timeout_ms = 5000;
  auto root = GlooGroup::Listen(o);
  ASSERT_TRUE(root.ok()) << root.status().ToString();
  o.rank = 1;
  auto member = GlooGroup::Join(root.value()->address(), o);
  ASSERT_TRUE(member.ok()) << member.status().ToString();
  Status joined;
  std::thread t([&] { joined = member.value()->Connect(); });
  ASSERT_TRUE(root.value()->Connect().ok());
  t.join();
  ASSERT_TRUE(joined.ok()) << joined.ToString();
  member.value().reset();  // rank 1 goes (its process would exit)
  const auto t0 = std::chrono::steady_clock::now();
  torch::Tensor x = torch::ones({64});
  Status s = root.value()->AllReduceSum(x);
  EXPECT_EQ(s.code(), Code::kUnavailable) << s.ToString();
  EXPECT_NE(s.message().find("closed by peer"), std::string::npos) << s.ToString();
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(30));
}

TEST(GlooGroup, RefusesBadAddressesAndOptions) {
  GlooOptions o;
  o.rank = 1;
  o.size = 2;
  o.timeout_ms = 1000;
  for (const char* a : {"", "127.0.0.1", ":80", "127.0.0.1:", "127.0.0.1:x", "127.0.0.1:70000", "h:0"}) {
    auto j = GlooGroup::Join(a, o);
    EXPECT_EQ(j.status().param(), "address") << a;
  }
  GlooOptions bad = o;
  bad.rank = 2;
  EXPECT_EQ(GlooGroup::Join("127.0.0.1:1", bad).status().param(), "rank");
  EXPECT_EQ(GlooGroup::Listen(o).status().param(), "rank");  // only rank 0 listens
  bad = o;
  bad.size = 0;
  EXPECT_EQ(GlooGroup::Join("127.0.0.1:1", bad).status().param(), "size");
  bad = o;
  bad.backend = "mpi";
  EXPECT_EQ(GlooGroup::Join("127.0.0.1:1", bad).status().param(), "backend");
}

// NCCL is compiled in wherever its headers were (every build from the
// lock's packages); without a CUDA device it refuses to connect, saying so,
// and takes only CUDA tensors.
TEST(GlooGroup, TheNcclBackendIsBuiltAndNeedsACudaDevice) {
#ifdef BURST_NCCL_EXPECTED
  EXPECT_TRUE(HasNccl()) << "this build was configured with NCCL's headers";
#endif
  if (torch::cuda::is_available()) GTEST_SKIP() << "a machine with CUDA: the GPU check runs NCCL";
  GlooOptions o;
  o.size = 1;
  o.timeout_ms = 5000;
  o.backend = "nccl";
  auto g = GlooGroup::Listen(o);
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  Status s = g.value()->Connect();
  EXPECT_EQ(s.code(), Code::kFailedPrecondition) << s.ToString();
  EXPECT_EQ(s.param(), "backend");
  torch::Tensor t = torch::ones({4});
  EXPECT_EQ(g.value()->AllReduceSum(t).code(), Code::kFailedPrecondition) << "not connected";
}

}  // namespace
}  // namespace burst
