// How many CPU threads Burst's math may use.
//
// libtorch's intra-op pool (OpenMP) parallelises elementwise kernels, but the
// GEMMs go to the BLAS library. PyPI's libtorch has MKL inside, whose
// threads follow torch::set_num_threads; a libtorch on OpenBLAS (pthreads
// build) keeps its own thread pool, which ignores it and by default starts
// one thread per core: a "1 thread" run then still
// uses every core for GEMMs, and an N-thread run has two pools of N spinning
// threads competing for N cores. SetCpuThreads sets both.
//
// OpenMP threads that wait actively (libgomp's default) also spin for a while
// after every parallel region. Where the GEMMs run on OpenBLAS's own threads,
// those then find their cores busy: on this project's 2-core machine a
// 2-thread training step ran 3x slower than a 1-thread one, and passive
// waiting made the 2-thread step the faster one. On MKL (PyPI's libtorch)
// the GEMMs run on libgomp's threads, and passive waiting is the slow one:
// every parallel region wakes a sleeping thread (2-thread LoRA steps 1.3-2x
// slower, decoding 3x; docs/bench.md, "Threads"). So only an OpenBLAS
// libtorch gets OMP_WAIT_POLICY=PASSIVE. libgomp reads it once, while the
// process loads, before main() (and glibc restores the original environment
// after .preinit_array functions run, so no earlier hook helps): the only way
// to change it is to start again with it set. EnsureCpuEnvironment does that
// for the commands that compute.
//
// Thread-safety: call before starting work, from the main thread.
#pragma once

#include <string>
#include <vector>

namespace burst {

struct CpuThreads {
  int intra_op = 1;  // torch::get_num_threads()
  int blas = -1;     // the BLAS library's threads (OpenBLAS's or MKL's); -1 when it cannot be read
};

// Sets libtorch's intra-op threads and, when the BLAS is OpenBLAS, its
// threads, both to n (n >= 1).
void SetCpuThreads(int n);
CpuThreads GetCpuThreads();

// Where libtorch computes with OpenBLAS: sets OMP_WAIT_POLICY=PASSIVE when
// unset and re-executes this program with the same arguments (it does not
// return then); an explicit OMP_WAIT_POLICY is left alone. Call first thing
// in main(), before threads exist; costs one more process start (~0.5 s
// with libtorch). On MKL (PyPI's libtorch) it sets nothing and returns.
//
// Where libtorch computes with OpenBLAS, also sets OPENBLAS_THREAD_TIMEOUT=4
// when unset (OpenBLAS's threads sleep right after a GEMM instead of
// spinning on sched_yield through the work between GEMMs), and
// OPENBLAS_CORETYPE when OpenBLAS fell back to pre-AVX2 kernels on a CPU that
// has better (core/blas_core.h), in the same single restart.
void EnsureCpuEnvironment(char** argv);
// The variables EnsureCpuEnvironment would set (none: it returns at once).
std::vector<const char*> CpuEnvironmentToSet();

// The kernel set the BLAS runs: OpenBLAS's ("SkylakeX", "Haswell",
// "Prescott"...); for MKL (PyPI's libtorch) what MKL and ATen choose their
// kernels by ("MKL AuthenticAMD AVX2", with MKL_CBWR or
// MKL_ENABLE_INSTRUCTIONS when set); "" for another BLAS.
std::string BlasCoreName();

// The BLAS library libtorch computes with, as built (core/blas_core.h):
// "OpenBLAS 0.3.21 NO_LAPACKE DYNAMIC_ARCH NO_AFFINITY MAX_THREADS=64", MKL's
// version, or "" when libtorch names none.
std::string BlasLibraryName();

}  // namespace burst
