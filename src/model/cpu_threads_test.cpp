#include "model/cpu_threads.h"

#include <ATen/Version.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cstdlib>
#include <string>
#include <vector>

namespace burst {
namespace {

// A libtorch on OpenBLAS does its GEMMs in OpenBLAS's own thread pool, which
// torch::set_num_threads does not reach; SetCpuThreads must set both. On MKL
// (PyPI's) torch sets MKL's threads itself.
TEST(CpuThreads, SetsTorchAndBlas) {
  for (int n : {1, 2, 1}) {
    SetCpuThreads(n);
    CpuThreads t = GetCpuThreads();
    EXPECT_EQ(t.intra_op, n);
    ASSERT_NE(t.blas, -1) << "neither OpenBLAS's nor MKL's threads can be read";
    EXPECT_EQ(t.blas, n);
  }
}

// The engine starts itself again only for what it must set before libtorch's
// threads exist: on MKL, nothing, whatever OMP_WAIT_POLICY is (libgomp's
// own waiting is the faster there); on OpenBLAS, passive waiting when unset
// and OpenBLAS's variables.
TEST(CpuThreads, RestartsOnlyForWhatItSets) {
  const char* omp = std::getenv("OMP_WAIT_POLICY");
  const std::string saved = omp ? omp : "";
  ::unsetenv("OPENBLAS_THREAD_TIMEOUT");
  const bool openblas = BlasLibraryName().rfind("OpenBLAS", 0) == 0;
  for (const char* policy : {"PASSIVE", static_cast<const char*>(nullptr)}) {
    if (policy != nullptr) {
      ::setenv("OMP_WAIT_POLICY", policy, 1);
    } else {
      ::unsetenv("OMP_WAIT_POLICY");
    }
    const std::vector<const char*> set = CpuEnvironmentToSet();
    if (!openblas) {
      EXPECT_TRUE(set.empty()) << "an MKL libtorch restarted for " << set.front();
    } else {
      ASSERT_FALSE(set.empty());
      EXPECT_STREQ(set.front(), policy != nullptr ? "OPENBLAS_THREAD_TIMEOUT" : "OMP_WAIT_POLICY");
    }
  }
  if (omp) ::setenv("OMP_WAIT_POLICY", saved.c_str(), 1);
}

TEST(CpuThreads, ZeroOrLessMeansOne) {
  SetCpuThreads(0);
  EXPECT_EQ(GetCpuThreads().intra_op, 1);
}

// The library a run records beside its kernels: OpenBLAS's version and
// build, without the kernels' name (recorded apart); or MKL's version, with
// what its kernels follow (the CPU's vendor and ATen's capability).
TEST(CpuThreads, NamesTheBlasLibraryAndItsKernels) {
  const std::string core = BlasCoreName(), library = BlasLibraryName();
  ASSERT_FALSE(library.empty()) << "libtorch names no BLAS";
  if (library.find("Math Kernel Library") != std::string::npos) {
    EXPECT_EQ(core.rfind("MKL ", 0), 0u) << core;
    EXPECT_NE(core.find(at::get_cpu_capability()), std::string::npos) << core;
    return;
  }
  EXPECT_EQ(library.rfind("OpenBLAS 0.", 0), 0u) << library;
  EXPECT_EQ((" " + library + " ").find(" " + core + " "), std::string::npos) << library;
}

}  // namespace
}  // namespace burst
