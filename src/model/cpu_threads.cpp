#include "model/cpu_threads.h"

#include <ATen/Version.h>
#include <cpuid.h>
#include <dlfcn.h>
#include <stdlib.h>
#include <torch/torch.h>
#include <unistd.h>

#include <cstring>
#include <string_view>

#include "core/blas_core.h"

namespace burst {
namespace {

// OpenBLAS is found at run time (it is libtorch's dependency, not Burst's):
// a libtorch built against MKL or another BLAS simply has no such symbols.
template <typename Fn>
Fn OpenBlasSymbol(const char* name) {
  return reinterpret_cast<Fn>(dlsym(RTLD_DEFAULT, name));
}

// The CPU's vendor ("GenuineIntel", "AuthenticAMD"): MKL takes other code
// paths on other vendors' CPUs with the same vector units.
std::string CpuVendor() {
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (__get_cpuid(0, &a, &b, &c, &d) == 0) return "unknown-vendor";
  char vendor[13] = {};
  std::memcpy(vendor, &b, 4);
  std::memcpy(vendor + 4, &d, 4);
  std::memcpy(vendor + 8, &c, 4);
  return vendor;
}

// What picks the kernels of a libtorch on MKL (PyPI's wheel): MKL
// dispatches on the CPU's vendor and vector units unless MKL_CBWR or
// MKL_ENABLE_INSTRUCTIONS pins its code path, and ATen's own vectorised
// kernels on its CPU capability (ATEN_CPU_CAPABILITY lowers it). MKL's own
// report of its branch is not part of its exported interface, so the inputs
// of its choice are named instead: "MKL AuthenticAMD AVX2".
std::string MklKernels() {
  std::string s = "MKL " + CpuVendor() + " " + at::get_cpu_capability();
  for (const char* name : {"MKL_CBWR", "MKL_ENABLE_INSTRUCTIONS"}) {
    if (const char* v = getenv(name); v != nullptr && *v != '\0') s += std::string(" ") + name + "=" + v;
  }
  return s;
}

}  // namespace

void SetCpuThreads(int n) {
  if (n < 1) n = 1;
  torch::set_num_threads(n);
  if (auto set = OpenBlasSymbol<void (*)(int)>("openblas_set_num_threads")) set(n);
}

CpuThreads GetCpuThreads() {
  CpuThreads t;
  t.intra_op = torch::get_num_threads();
  if (auto get = OpenBlasSymbol<int (*)()>("openblas_get_num_threads"))
    t.blas = get();
  else if (auto mkl = OpenBlasSymbol<int (*)()>("mkl_get_max_threads"))
    t.blas = mkl();  // set by torch
  return t;
}

std::vector<const char*> CpuEnvironmentToSet() {
  std::vector<const char*> set;
  // Passive waiting only where libtorch computes with OpenBLAS, whose own
  // threads need the cores libgomp's would spin on. On MKL (PyPI's) the
  // BLAS runs on libgomp's threads, and libgomp's default (spin a while,
  // then sleep) is the faster: passive waiting wakes a sleeping thread for
  // every parallel region (docs/bench.md, "Threads on MKL").
  auto corename = OpenBlasSymbol<const char* (*)()>("openblas_get_corename");
  if (corename != nullptr && getenv("OMP_WAIT_POLICY") == nullptr) set.push_back("OMP_WAIT_POLICY");
  // OpenBLAS's own worker threads spin (sched_yield) for about 2^28 cycles
  // after each GEMM before they sleep; between GEMMs that steals the core
  // libtorch's threads need for everything else (a fifth of a 2-thread LoRA
  // step's CPU time went to sched_yield). 2^4 cycles: they sleep at once.
  // Only where libtorch computes with OpenBLAS (not PyPI's, on MKL).
  if (corename != nullptr && getenv("OPENBLAS_THREAD_TIMEOUT") == nullptr)
    set.push_back("OPENBLAS_THREAD_TIMEOUT");
  if (corename != nullptr && getenv("OPENBLAS_CORETYPE") == nullptr && corename() != nullptr &&
      !BetterBlasCore(corename(), HostVectorUnits()).empty()) {
    set.push_back("OPENBLAS_CORETYPE");
  }
  return set;
}

void EnsureCpuEnvironment(char** argv) {
  const std::vector<const char*> set = CpuEnvironmentToSet();
  if (set.empty()) return;
  std::vector<const char*> done;
  for (const std::string_view name : set) {
    bool ok = false;
    if (name == "OMP_WAIT_POLICY") ok = setenv("OMP_WAIT_POLICY", "PASSIVE", 1) == 0;
    if (name == "OPENBLAS_THREAD_TIMEOUT") ok = setenv("OPENBLAS_THREAD_TIMEOUT", "4", 1) == 0;
    if (name == "OPENBLAS_CORETYPE") {
      ok = PreferBetterBlasCore(OpenBlasSymbol<const char* (*)()>("openblas_get_corename"));
    }
    if (ok) done.push_back(name.data());
  }
  if (done.empty()) return;
  execv("/proc/self/exe", argv);
  // Only reached when the exec failed: carry on with libgomp's waiting and
  // OpenBLAS's kernels as loaded, which are slower but compute as well.
  for (const char* name : done) unsetenv(name);
}

std::string BlasCoreName() {
  auto corename = OpenBlasSymbol<const char* (*)()>("openblas_get_corename");
  const char* name = corename != nullptr ? corename() : nullptr;
  if (name != nullptr) return name;
  const std::string library = BlasLibraryName();
  if (library.find("Math Kernel Library") != std::string::npos || library == "mkl") return MklKernels();
  return "";
}

std::string BlasLibraryName() {
  // Which library is loaded does not change while the process runs.
  static const std::string name = [] {
    auto config = OpenBlasSymbol<const char* (*)()>("openblas_get_config");
    const char* text = config != nullptr ? config() : nullptr;
    if (text != nullptr) return OpenBlasLibrary(text, BlasCoreName());
    return BlasLibraryFromTorchConfig(at::show_config());
  }();
  return name;
}

}  // namespace burst
