// BURST_SIMD_CLONES: a plain loop compiled for AVX-512, AVX2 and plain
// x86-64, the loader picking the widest the CPU has (GCC function
// multiversioning). By instruction set, not by CPU model:
// "arch=skylake-avx512" asks __builtin_cpu_is, which a CPU newer than GCC
// 12's table fails (this project's build machine ran the SSE loops that
// way: core/blas_core.h tells the same story of OpenBLAS).
#pragma once

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define BURST_SIMD_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define BURST_SIMD_CLONES
#endif
