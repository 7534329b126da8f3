#include "model/cpu_threads.h"

#include <dlfcn.h>
#include <stdlib.h>
#include <torch/torch.h>
#include <unistd.h>

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

void EnsurePassiveOpenMpWait(char** argv) {
  if (getenv("OMP_WAIT_POLICY") != nullptr) return;
  if (setenv("OMP_WAIT_POLICY", "PASSIVE", /*overwrite=*/1) != 0) return;
  execv("/proc/self/exe", argv);
  // Only reached when the exec failed: carry on with libgomp's default, which
  // is slower with more than one thread but computes the same results.
  unsetenv("OMP_WAIT_POLICY");
}

}  // namespace burst
