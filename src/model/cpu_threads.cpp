#include "model/cpu_threads.h"

#include <ATen/Version.h>
#include <dlfcn.h>
#include <stdlib.h>
#include <torch/torch.h>
#include <unistd.h>

#include "core/blas_core.h"

namespace burst {
namespace {

// OpenBLAS is found at run time (it is libtorch's dependency, not Burst's):
// a libtorch built against MKL or another BLAS simply has no such symbols.
template <typename Fn>
Fn OpenBlasSymbol(const char* name) {
  return reinterpret_cast<Fn>(dlsym(RTLD_DEFAULT, name));
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
  if (auto get = OpenBlasSymbol<int (*)()>("openblas_get_num_threads")) t.blas = get();
  return t;
}

void EnsureCpuEnvironment(char** argv) {
  const bool wait = getenv("OMP_WAIT_POLICY") == nullptr && setenv("OMP_WAIT_POLICY", "PASSIVE", 1) == 0;
  // OpenBLAS's own worker threads spin (sched_yield) for about 2^28 cycles
  // after each GEMM before they sleep; between GEMMs that steals the core
  // libtorch's threads need for everything else (a fifth of a 2-thread LoRA
  // step's CPU time went to sched_yield). 2^4 cycles: they sleep at once.
  const bool blas_wait =
      getenv("OPENBLAS_THREAD_TIMEOUT") == nullptr && setenv("OPENBLAS_THREAD_TIMEOUT", "4", 1) == 0;
  const bool blas = PreferBetterBlasCore(OpenBlasSymbol<const char* (*)()>("openblas_get_corename"));
  if (!wait && !blas && !blas_wait) return;
  execv("/proc/self/exe", argv);
  // Only reached when the exec failed: carry on with libgomp's waiting and
  // OpenBLAS's kernels as loaded, which are slower but compute as well.
  if (wait) unsetenv("OMP_WAIT_POLICY");
  if (blas_wait) unsetenv("OPENBLAS_THREAD_TIMEOUT");
  if (blas) unsetenv("OPENBLAS_CORETYPE");
}

std::string BlasCoreName() {
  auto corename = OpenBlasSymbol<const char* (*)()>("openblas_get_corename");
  const char* name = corename != nullptr ? corename() : nullptr;
  return name != nullptr ? name : "";
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
