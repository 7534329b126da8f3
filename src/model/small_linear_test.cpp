// Tests of the few-rows product (small_linear.h): it equals torch::linear,
// a row's result is bit-for-bit the same alone, in any batch and at either
// vector width, and it stays out of what it does not serve.
#include "model/small_linear.h"

#include <gtest/gtest.h>

#include <vector>

namespace burst {
namespace {

torch::Tensor Random(std::vector<int64_t> shape, uint64_t seed) {
  auto gen = at::make_generator<at::CPUGeneratorImpl>(seed);
  return torch::empty(shape).normal_(0.0, 1.0, gen);
}

class SmallLinearTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (detail::SmallLinearWidestLanes() == 0) GTEST_SKIP() << "this CPU has neither AVX-512 nor AVX2+FMA";
  }
  torch::NoGradGuard no_grad_;
};

TEST_F(SmallLinearTest, EqualsTorchLinear) {
  // Rows across one and two lane groups, outputs across whole and partial
  // blocks of 8, depths from 1 to an MLP's.
  for (int64_t r : {1, 3, 8, 9, 16, 17, 32}) {
    for (int64_t n : {1, 7, 8, 13, 256}) {
      for (int64_t k : {1, 5, 64, 704}) {
        SCOPED_TRACE("R " + std::to_string(r) + ", N " + std::to_string(n) + ", K " + std::to_string(k));
        const torch::Tensor x = Random({r, k}, 1), w = Random({n, k}, 2);
        EXPECT_EQ(SmallLinearApplies(x, w), r >= kSmallLinearMinRows);  // the kernel itself takes any
        const torch::Tensor want = torch::linear(x.to(torch::kFloat64), w.to(torch::kFloat64));
        const torch::Tensor got = SmallLinear(x, w);
        ASSERT_EQ(got.sizes(), want.sizes());
        const double tol = 1e-5 * (1.0 + std::sqrt(static_cast<double>(k)));
        EXPECT_LT((got.to(torch::kFloat64) - want).abs().max().item<double>(), tol);
      }
    }
  }
}

TEST_F(SmallLinearTest, EachRowAloneWhateverTheBatchAndTheVectorWidth) {
  const torch::Tensor x = Random({32, 256}, 3), w = Random({704, 256}, 4);
  const torch::Tensor all = SmallLinear(x, w);
  for (int64_t i : {0, 5, 15, 16, 31}) {
    EXPECT_TRUE(torch::equal(SmallLinear(x.narrow(0, i, 1), w), all.narrow(0, i, 1))) << "row " << i;
  }
  // Rows in another order, and another batch around row 20.
  const torch::Tensor order = torch::randperm(32, torch::kInt64);
  EXPECT_TRUE(torch::equal(SmallLinear(x.index_select(0, order), w), all.index_select(0, order)));
  const torch::Tensor other = torch::cat({Random({6, 256}, 5), x.narrow(0, 20, 1)});
  EXPECT_TRUE(torch::equal(SmallLinear(other, w).narrow(0, 6, 1), all.narrow(0, 20, 1)));
  if (detail::SmallLinearWidestLanes() == 16) {  // the AVX2 kernel on this CPU: lane for lane the same
    EXPECT_TRUE(torch::equal(detail::SmallLinearLanes(x, w, 8), all));
  }
  // Threads split the outputs, never a row's sum.
  const int threads = torch::get_num_threads();
  torch::set_num_threads(2);
  const torch::Tensor two = SmallLinear(x, w);
  torch::set_num_threads(threads);
  EXPECT_TRUE(torch::equal(two, all));
}

TEST_F(SmallLinearTest, DecodeLinearKeepsShapeAndBiasAndFallsBack) {
  const torch::Tensor x = Random({4, 1, 64}, 6), w = Random({24, 64}, 7), b = Random({24}, 8);
  const torch::Tensor y = DecodeLinear(x, w, b);
  ASSERT_EQ(y.sizes(), (std::vector<int64_t>{4, 1, 24}));
  EXPECT_TRUE(torch::allclose(y, torch::linear(x, w, b), 1e-5, 1e-5));
  // Prefill-sized input, and one to three rows: torch::linear itself.
  for (const torch::Tensor& other : {Random({2, 40, 64}, 9), Random({kSmallLinearMinRows - 1, 1, 64}, 15)}) {
    EXPECT_TRUE(torch::equal(DecodeLinear(other, w, b), torch::linear(other, w, b)));
  }
}

TEST_F(SmallLinearTest, StaysOutOfWhatItDoesNotServe) {
  const torch::Tensor x = Random({4, 64}, 10), w = Random({24, 64}, 11);
  EXPECT_TRUE(SmallLinearApplies(x, w));
  EXPECT_FALSE(SmallLinearApplies(Random({kSmallLinearMaxRows + 1, 64}, 12), w)) << "too many rows";
  EXPECT_FALSE(SmallLinearApplies(x.narrow(0, 0, kSmallLinearMinRows - 1), w))
      << "OpenBLAS's own small kernel";
  EXPECT_FALSE(SmallLinearApplies(x.to(torch::kFloat64), w.to(torch::kFloat64))) << "float64";
  EXPECT_FALSE(SmallLinearApplies(x, Random({64, 24}, 13).t())) << "a transposed weight";
  EXPECT_FALSE(SmallLinearApplies(x, Random({24, 32}, 14))) << "mismatched depth";
  {
    torch::AutoGradMode grad(true);  // training: autograd records torch::linear
    EXPECT_FALSE(SmallLinearApplies(x, w));
  }
}

}  // namespace
}  // namespace burst
