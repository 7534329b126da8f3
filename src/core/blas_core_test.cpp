#include "core/blas_core.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

namespace burst {
namespace {

constexpr CpuVectorUnits kAvx512{/*avx512=*/true, /*avx2_fma=*/true};
constexpr CpuVectorUnits kAvx2{/*avx512=*/false, /*avx2_fma=*/true};
constexpr CpuVectorUnits kSse{/*avx512=*/false, /*avx2_fma=*/false};

TEST(BetterBlasCore, ReplacesOnlyAFallbackAndOnlyWithWhatTheCpuRuns) {
  struct Case {
    const char* detected;
    CpuVectorUnits cpu;
    const char* want;
  };
  const Case cases[] = {
      {"Prescott", kAvx512, "SkylakeX"},  // the build machine: model 207 unknown to OpenBLAS 0.3.21
      {"Prescott", kAvx2, "Haswell"},
      {"Prescott", kSse, ""},  // a CPU that really has no more
      {"prescott", kAvx512, "SkylakeX"},
      {"Sandybridge", kAvx512, "SkylakeX"},
      {"Nehalem", kAvx2, "Haswell"},
      {"Core2", kAvx512, "SkylakeX"},
      {"Unknown", kAvx2, "Haswell"},
      {"SkylakeX", kAvx512, ""},  // OpenBLAS knew the CPU
      {"Haswell", kAvx512, ""},   // nor is a deliberate choice upgraded
      {"Cooperlake", kAvx512, ""},
      {"Zen", kAvx2, ""},
      {"", kAvx512, ""},
      {"Prescott2", kAvx512, ""},  // whole names only
      {"Presc", kAvx512, ""},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(BetterBlasCore(c.detected, c.cpu), c.want) << c.detected;
  }
}

const char* FallbackCore() { return "Prescott"; }
const char* KnownCore() { return "SkylakeX"; }
const char* NoCore() { return nullptr; }

class PreferBetterBlasCoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (const char* v = std::getenv("OPENBLAS_CORETYPE")) saved_ = v, had_ = true;
    ::unsetenv("OPENBLAS_CORETYPE");
  }
  void TearDown() override {
    if (had_) {
      ::setenv("OPENBLAS_CORETYPE", saved_.c_str(), 1);
    } else {
      ::unsetenv("OPENBLAS_CORETYPE");
    }
  }
  static std::string Env() {
    const char* v = std::getenv("OPENBLAS_CORETYPE");
    return v != nullptr ? v : "(unset)";
  }
  std::string saved_;
  bool had_ = false;
};

TEST_F(PreferBetterBlasCoreTest, SetsTheCoreTypeForAFallbackOnThisCpu) {
  const std::string want = BetterBlasCore("Prescott", HostVectorUnits());
  EXPECT_EQ(PreferBetterBlasCore(&FallbackCore), !want.empty());
  EXPECT_EQ(Env(), want.empty() ? "(unset)" : want);
}

TEST_F(PreferBetterBlasCoreTest, LeavesAKnownCoreAndAMissingOpenBlasAlone) {
  EXPECT_FALSE(PreferBetterBlasCore(&KnownCore));
  EXPECT_FALSE(PreferBetterBlasCore(&NoCore));
  EXPECT_FALSE(PreferBetterBlasCore(nullptr));
  EXPECT_EQ(Env(), "(unset)");
}

TEST_F(PreferBetterBlasCoreTest, LeavesTheUsersChoiceAlone) {
  ::setenv("OPENBLAS_CORETYPE", "Prescott", 1);
  EXPECT_FALSE(PreferBetterBlasCore(&FallbackCore));
  EXPECT_EQ(Env(), "Prescott");
}

// What a run records as its BLAS library: the build without the kernels'
// name (recorded apart as "blas"), so one library on two CPUs is one value.
TEST(BlasLibrary, OpenBlasConfigLessTheCoreName) {
  EXPECT_EQ(OpenBlasLibrary("OpenBLAS 0.3.21 NO_LAPACKE DYNAMIC_ARCH NO_AFFINITY Zen MAX_THREADS=64", "Zen"),
            "OpenBLAS 0.3.21 NO_LAPACKE DYNAMIC_ARCH NO_AFFINITY MAX_THREADS=64");
  EXPECT_EQ(OpenBlasLibrary("OpenBLAS 0.3.21 NO_LAPACKE DYNAMIC_ARCH NO_AFFINITY Haswell MAX_THREADS=64",
                            "haswell"),
            OpenBlasLibrary("OpenBLAS 0.3.21 NO_LAPACKE DYNAMIC_ARCH NO_AFFINITY SkylakeX MAX_THREADS=64",
                            "SkylakeX"));
  EXPECT_EQ(OpenBlasLibrary("OpenBLAS 0.3.20  USE_OPENMP Haswell ", "Haswell"), "OpenBLAS 0.3.20 USE_OPENMP");
  EXPECT_EQ(OpenBlasLibrary("OpenBLAS 0.3.21 Haswell", ""), "OpenBLAS 0.3.21 Haswell");
  EXPECT_EQ(OpenBlasLibrary("", "Haswell"), "");
}

TEST(BlasLibrary, FromTorchsBuildSettings) {
  EXPECT_EQ(
      BlasLibraryFromTorchConfig(
          "PyTorch built with:\n  - GCC 9.3\n  - Intel(R) oneAPI Math Kernel Library Version 2022.2-Product "
          "Build 20220804 for Intel(R) 64 architecture applications\n  - Build settings: BLAS_INFO=mkl, "
          "BUILD_TYPE=Release, CXX_COMPILER=/opt/rh/devtoolset-9/root/usr/bin/c++\n"),
      "Intel(R) oneAPI Math Kernel Library Version 2022.2-Product Build 20220804 for Intel(R) 64 "
      "architecture "
      "applications");
  EXPECT_EQ(BlasLibraryFromTorchConfig(
                "PyTorch built with:\n  - Build settings: BLAS_INFO=open, BUILD_TYPE=Release\n"),
            "open");
  EXPECT_EQ(BlasLibraryFromTorchConfig("PyTorch built with:\n  - Build settings: LAPACK_INFO=open, "
                                       "SUBBLAS_INFO=x\n"),
            "");
  EXPECT_EQ(BlasLibraryFromTorchConfig(""), "");
}

}  // namespace
}  // namespace burst
