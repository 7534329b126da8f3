// How the engine links PyPI's libtorch (cmake/torch_package.cmake). The
// wheel's libtorch exports copies of libstdc++'s std::filesystem and string
// streams (built with its own, newer GCC) and MKL's Fortran BLAS symbols;
// which copy a call reaches is decided by the order of the program's
// libraries. Burst's calls must reach the libstdc++ it was compiled against.
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <filesystem>
#include <sstream>
#include <string>

namespace burst {
namespace {

std::string LibraryOf(const void* address) {
  Dl_info info{};
  if (dladdr(address, &info) == 0 || info.dli_fname == nullptr) return "(none)";
  return info.dli_fname;
}

TEST(TorchLink, StandardLibraryCallsReachLibstdcxx) {
  // The addresses the program's own calls are bound to.
  const auto remove_all =
      static_cast<std::uintmax_t (*)(const std::filesystem::path&)>(&std::filesystem::remove_all);
  const auto file_size =
      static_cast<std::uintmax_t (*)(const std::filesystem::path&)>(&std::filesystem::file_size);
  for (const void* f :
       {reinterpret_cast<const void*>(remove_all), reinterpret_cast<const void*>(file_size)}) {
    EXPECT_NE(LibraryOf(f).find("libstdc++"), std::string::npos) << LibraryOf(f);
  }
  // And they work on what this program builds with its own headers.
  const std::filesystem::path dir = std::filesystem::temp_directory_path() / "burst-torch-link";
  std::filesystem::create_directories(dir / "a" / "b");
  EXPECT_EQ(std::filesystem::remove_all(dir), 3u);
  std::ostringstream out;
  out << "x" << 1;
  EXPECT_EQ(out.str(), "x1");
}

// libtorch computes with the BLAS it was built with (MKL, inside it), not
// another one the process happens to load.
TEST(TorchLink, TorchsGemmIsItsOwn) {
  const void* sgemm = dlsym(RTLD_DEFAULT, "sgemm_");
  ASSERT_NE(sgemm, nullptr);
  EXPECT_NE(LibraryOf(sgemm).find("libtorch_cpu"), std::string::npos) << LibraryOf(sgemm);
}

}  // namespace
}  // namespace burst
