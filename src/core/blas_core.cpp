#include "core/blas_core.h"

#include <dlfcn.h>
#include <strings.h>

#include <cstdlib>

namespace burst {

CpuVectorUnits HostVectorUnits() {
  __builtin_cpu_init();
  CpuVectorUnits u;
  u.avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512cd") &&
             __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq") &&
             __builtin_cpu_supports("avx512vl");
  u.avx2_fma = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  return u;
}

std::string BetterBlasCore(std::string_view detected, const CpuVectorUnits& cpu) {
  // OpenBLAS's x86-64 cores without AVX2 (its dynamic.c corename table):
  // what it falls back to, or a CPU that really has no more.
  static constexpr const char* kFallbacks[] = {
      "Unknown", "Katmai",   "Coppermine", "Northwood",    "Prescott",  "Banias", "Atom",
      "Core2",   "Penryn",   "Dunnington", "Nehalem",      "Athlon",    "Opteron", "Opteron_SSE3",
      "Barcelona", "Nano",   "Bobcat",     "Sandybridge",  "Bulldozer", "Piledriver"};
  bool fallback = false;
  for (const char* f : kFallbacks) {
    const std::string_view name(f);
    if (detected.size() == name.size() && strncasecmp(detected.data(), f, name.size()) == 0) fallback = true;
  }
  if (!fallback) return "";
  if (cpu.avx512) return "SkylakeX";
  if (cpu.avx2_fma) return "Haswell";
  return "";
}

bool PreferBetterBlasCore(const char* (*corename)()) {
  if (corename == nullptr || std::getenv("OPENBLAS_CORETYPE") != nullptr) return false;
  const char* detected = corename();
  if (detected == nullptr) return false;
  const std::string better = BetterBlasCore(detected, HostVectorUnits());
  return !better.empty() && ::setenv("OPENBLAS_CORETYPE", better.c_str(), /*overwrite=*/0) == 0;
}

bool PreferBetterBlasCoreBeforeExec() {
  if (std::getenv("OPENBLAS_CORETYPE") != nullptr) return false;
  // Not closed: the caller replaces this process next.
  void* lib = ::dlopen("libopenblas.so.0", RTLD_LAZY | RTLD_LOCAL);
  if (lib == nullptr) return false;
  auto corename = reinterpret_cast<const char* (*)()>(::dlsym(lib, "openblas_get_corename"));
  return PreferBetterBlasCore(corename);
}

}  // namespace burst
