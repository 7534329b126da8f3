#include "core/blas_core.h"

#include <strings.h>

#include <algorithm>
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
      "Unknown",   "Katmai", "Coppermine", "Northwood",   "Prescott",  "Banias",    "Atom",
      "Core2",     "Penryn", "Dunnington", "Nehalem",     "Athlon",    "Opteron",   "Opteron_SSE3",
      "Barcelona", "Nano",   "Bobcat",     "Sandybridge", "Bulldozer", "Piledriver"};
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

std::string OpenBlasLibrary(std::string_view config, std::string_view corename) {
  std::string out;
  size_t i = 0;
  while (i < config.size()) {
    while (i < config.size() && config[i] == ' ') ++i;
    const size_t end = std::min(config.find(' ', i), config.size());
    const std::string_view word = config.substr(i, end - i);
    const bool core = !corename.empty() && word.size() == corename.size() &&
                      strncasecmp(word.data(), corename.data(), word.size()) == 0;
    if (!word.empty() && !core) out += (out.empty() ? "" : " ") + std::string(word);
    i = end;
  }
  return out;
}

std::string BlasLibraryFromTorchConfig(std::string_view show_config) {
  std::string info;
  size_t i = 0;
  while (i < show_config.size()) {
    const size_t end = std::min(show_config.find('\n', i), show_config.size());
    std::string_view line = show_config.substr(i, end - i);
    i = end + 1;
    while (!line.empty() && (line.front() == ' ' || line.front() == '-')) line.remove_prefix(1);
    while (!line.empty() && (line.back() == ' ' || line.back() == '\r')) line.remove_suffix(1);
    if (line.find("Math Kernel Library Version") != std::string_view::npos) return std::string(line);
    // "BLAS_INFO=mkl, BUILD_TYPE=Release, ...": the value up to the comma.
    if (const size_t at = line.find("BLAS_INFO="); info.empty() && at != std::string_view::npos &&
                                                   (at == 0 || line[at - 1] == ' ' || line[at - 1] == ',')) {
      const std::string_view rest = line.substr(at + 10);
      info = std::string(rest.substr(0, std::min(rest.find(','), rest.size())));
    }
  }
  return info;
}

}  // namespace burst
