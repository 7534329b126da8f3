# libtorch from a pip-installed PyTorch (BURST_TORCH_PACKAGE = the `torch`
# package's folder), without TorchConfig.cmake: that config looks up a CUDA
# toolkit, cuDNN and NVTX of its own, which a machine's PyTorch may not
# match. What Burst needs is the headers, the libraries and the C++ ABI flag.
# Sets what find_package(Torch) sets: TORCH_LIBRARIES, TORCH_INCLUDE_DIRS,
# TORCH_CXX_FLAGS.
set(_tp ${BURST_TORCH_PACKAGE})
if(NOT EXISTS ${_tp}/include/torch/csrc/api/include/torch/torch.h)
  message(FATAL_ERROR "BURST_TORCH_PACKAGE=${_tp} has no include/torch/csrc/api/include/torch/torch.h")
endif()
# The ABI the libraries were built with: torch/_C reports it, and the
# headers' version.h the version (for the log).
if(NOT DEFINED BURST_TORCH_CXX11_ABI)
  set(BURST_TORCH_CXX11_ABI 1)
endif()
add_library(burst_torch_package INTERFACE IMPORTED)
set(_libs)
# libtorch_cuda has the CUDA kernels and registers them when it loads: link
# it even though no symbol of it is named (--no-as-needed), as TorchConfig does.
if(EXISTS ${_tp}/lib/libtorch_cuda.so)
  list(APPEND _libs "-Wl,--no-as-needed" ${_tp}/lib/libtorch_cuda.so "-Wl,--as-needed" ${_tp}/lib/libc10_cuda.so)
  set(BURST_TORCH_HAS_CUDA ON)
endif()
list(APPEND _libs ${_tp}/lib/libtorch.so ${_tp}/lib/libtorch_cpu.so ${_tp}/lib/libc10.so)
# The CUDA libraries libtorch_cuda needs come from the pip packages beside
# it (its RUNPATH finds them at run time); the linker need not resolve them.
list(APPEND _libs "-Wl,--allow-shlib-undefined" "-Wl,-rpath,${_tp}/lib")
target_link_libraries(burst_torch_package INTERFACE ${_libs})
set(TORCH_LIBRARIES burst_torch_package)
set(TORCH_INCLUDE_DIRS ${_tp}/include ${_tp}/include/torch/csrc/api/include)
set(TORCH_CXX_FLAGS -D_GLIBCXX_USE_CXX11_ABI=${BURST_TORCH_CXX11_ABI})
set(_v)
foreach(_part MAJOR MINOR PATCH)
  file(STRINGS ${_tp}/include/torch/csrc/api/include/torch/version.h _line REGEX "define TORCH_VERSION_${_part} ")
  string(REGEX REPLACE ".* ([0-9]+).*" "\\1" _n "${_line}")
  list(APPEND _v ${_n})
endforeach()
string(JOIN "." _v ${_v})
if(NOT BURST_TORCH_HAS_CUDA)
  set(BURST_TORCH_HAS_CUDA OFF)
endif()
message(STATUS "libtorch ${_v} from ${_tp}: CUDA ${BURST_TORCH_HAS_CUDA}, CXX11 ABI ${BURST_TORCH_CXX11_ABI}")
