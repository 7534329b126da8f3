// Which OpenBLAS kernels Burst's math runs on.
//
// Debian 12's OpenBLAS (0.3.21, DYNAMIC_ARCH) picks its kernels from the CPU's
// family and model number. A CPU newer than its table, or a VM that reports a
// generic model name, gets the oldest x86-64 set (SSE3 "Prescott") even when
// it has AVX-512: on this project's build machine (family 6 model 207, AVX-512)
// that halved the speed of every GEMM (docs/bench.md, "BLAS kernels").
// OpenBLAS reads OPENBLAS_CORETYPE once, while it loads, so the fix is to set
// it before the process that computes starts: the engine (EnsureCpuEnvironment
// in model/cpu_threads.h) sets it and starts itself again when the libtorch
// it runs on loaded OpenBLAS (one built on it; PyPI's runs on MKL, where
// none of this applies).
//
// Only a fallback choice is corrected, and only to kernels the CPU runs
// (AVX-512 F/CD/BW/DQ/VL for SkylakeX, AVX2 and FMA for Haswell, as libgcc
// reports them, OS support included); an OPENBLAS_CORETYPE the user set is
// left alone, and OPENBLAS_CORETYPE=Prescott restores OpenBLAS's own choice.
//
// Thread-safety: call from the main thread before other threads start.
#pragma once

#include <string>
#include <string_view>

namespace burst {

struct CpuVectorUnits {
  bool avx512 = false;    // F, CD, BW, DQ and VL: OpenBLAS's SkylakeX kernels
  bool avx2_fma = false;  // AVX2 and FMA: its Haswell kernels
};

CpuVectorUnits HostVectorUnits();

// The OpenBLAS core type to ask for when OpenBLAS detected `detected` on a CPU
// with `cpu`; empty when its choice stands (not a pre-AVX2 fallback, or the
// CPU has nothing better).
std::string BetterBlasCore(std::string_view detected, const CpuVectorUnits& cpu);

// When OPENBLAS_CORETYPE is unset and `corename` (OpenBLAS's
// openblas_get_corename, or null when OpenBLAS is not loaded) names a core
// BetterBlasCore would replace: sets OPENBLAS_CORETYPE and returns true, so
// that the caller starts the computing process afresh.
bool PreferBetterBlasCore(const char* (*corename)());

// The BLAS library as built, which a run records beside its kernels
// ("blas_library" beside "blas"): another version or build of the same
// kernels may round differently. From OpenBLAS's openblas_get_config()
// (`config`), less the kernels' name `corename` that it carries (recorded
// apart): "OpenBLAS 0.3.21 NO_LAPACKE DYNAMIC_ARCH NO_AFFINITY MAX_THREADS=64".
std::string OpenBlasLibrary(std::string_view config, std::string_view corename);

// For a libtorch on another BLAS, from the text of its at::show_config():
// MKL's version line when it has one, else BLAS_INFO's value ("mkl",
// "open"); "" when it names no BLAS.
std::string BlasLibraryFromTorchConfig(std::string_view show_config);

}  // namespace burst
