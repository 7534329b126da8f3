#include "model/cpu_threads.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

namespace burst {
namespace {

// Debian's libtorch does its GEMMs in OpenBLAS, whose own thread pool
// torch::set_num_threads does not reach; SetCpuThreads must set both.
TEST(CpuThreads, SetsTorchAndBlas) {
  for (int n : {1, 2, 1}) {
    SetCpuThreads(n);
    CpuThreads t = GetCpuThreads();
    EXPECT_EQ(t.intra_op, n);
    if (t.blas == -1) GTEST_SKIP() << "the BLAS is not OpenBLAS";
    EXPECT_EQ(t.blas, n);
  }
}

TEST(CpuThreads, ZeroOrLessMeansOne) {
  SetCpuThreads(0);
  EXPECT_EQ(GetCpuThreads().intra_op, 1);
}

// The library a run records beside its kernels: OpenBLAS's version and
// build, without the kernels' name (recorded apart).
TEST(CpuThreads, NamesTheBlasLibrary) {
  const std::string core = BlasCoreName(), library = BlasLibraryName();
  if (core.empty()) GTEST_SKIP() << "the BLAS is not OpenBLAS (" << library << ")";
  EXPECT_EQ(library.rfind("OpenBLAS 0.", 0), 0u) << library;
  EXPECT_EQ((" " + library + " ").find(" " + core + " "), std::string::npos) << library;
}

}  // namespace
}  // namespace burst
