# libtorch from a pip-installed PyTorch (BURST_TORCH_DIR = the `torch`
# package's folder: BURST_TORCH_PACKAGE, or the project's .venv), without
# TorchConfig.cmake: that config looks up a CUDA toolkit, cuDNN and NVTX of
# its own, which a machine's PyTorch may not match. What Burst needs is the
# headers, the libraries and the C++ ABI flag. Sets what find_package(Torch)
# sets: TORCH_LIBRARIES, TORCH_INCLUDE_DIRS, TORCH_CXX_FLAGS.
set(_tp ${BURST_TORCH_DIR})
if(NOT EXISTS ${_tp}/include/torch/csrc/api/include/torch/torch.h)
  message(FATAL_ERROR "${_tp} has no include/torch/csrc/api/include/torch/torch.h")
endif()
# The C++ ABI the libraries were built with: libc10's names carry
# std::__cxx11 under the new one. Compiling Burst with the other would link
# (mostly) and then pass strings of one layout to code of the other.
file(STRINGS ${_tp}/lib/libc10.so _cxx11 REGEX "__cxx11" LIMIT_COUNT 1)
if(_cxx11)
  set(_abi 1)
else()
  set(_abi 0)
endif()
if(NOT DEFINED BURST_TORCH_CXX11_ABI)
  set(BURST_TORCH_CXX11_ABI ${_abi})
elseif(NOT BURST_TORCH_CXX11_ABI EQUAL _abi)
  message(FATAL_ERROR "BURST_TORCH_CXX11_ABI=${BURST_TORCH_CXX11_ABI}, but ${_tp}/lib/libc10.so was built with _GLIBCXX_USE_CXX11_ABI=${_abi}")
endif()
add_library(burst_torch_package INTERFACE IMPORTED)
# libstdc++ first: the wheel's libtorch exports copies of libstdc++'s
# std::filesystem and string streams, built by a newer GCC; a library earlier
# in a program's list wins its calls, so without this Burst's own calls (made
# with Debian's headers) reached libtorch's copies and the engine's tests
# crashed (remove_all's crash on the GPU machine looked the same). One item
# each, so that CMake cannot fold the switches.
set(_libs "-Wl,--push-state,--no-as-needed,-lstdc++,--pop-state")
# libtorch_cuda has the CUDA kernels and registers them when it loads: link
# it even though no symbol of it is named (--no-as-needed), as TorchConfig does.
if(EXISTS ${_tp}/lib/libtorch_cuda.so)
  list(APPEND _libs "-Wl,--push-state,--no-as-needed,${_tp}/lib/libtorch_cuda.so,--pop-state" ${_tp}/lib/libc10_cuda.so)
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
# The version (2.x keeps it in torch/headeronly/version.h): Burst's code
# assumes 2.9 or later.
set(_vh ${_tp}/include/torch/headeronly/version.h)
if(NOT EXISTS ${_vh})
  set(_vh ${_tp}/include/torch/csrc/api/include/torch/version.h)
endif()
set(_v)
foreach(_part MAJOR MINOR PATCH)
  file(STRINGS ${_vh} _line REGEX "define TORCH_VERSION_${_part} ")
  string(REGEX REPLACE ".* ([0-9]+).*" "\\1" _n "${_line}")
  list(APPEND _v ${_n})
endforeach()
string(JOIN "." _v ${_v})
if(_v VERSION_LESS 2.9)
  message(FATAL_ERROR "libtorch ${_v} at ${_tp}: Burst needs 2.9 or later (scripts/install-deps.sh installs the pinned one into .venv)")
endif()
if(NOT BURST_TORCH_HAS_CUDA)
  set(BURST_TORCH_HAS_CUDA OFF)
endif()
# c10d's NCCL group (ProcessGroupNCCL, in libtorch_cuda): its header needs
# NCCL's and CUDA's headers, crt/ and nv/ included, from the pip packages
# beside torch (the lock installs nvidia-cuda-crt and nvidia-cuda-cccl for
# them). BURST_NCCL_INCLUDE_DIRS is set when all are there.
set(BURST_NCCL OFF)
get_filename_component(_nv ${_tp}/../nvidia ABSOLUTE)
file(GLOB _cuda_inc ${_nv}/cu*/include)
if(BURST_TORCH_HAS_CUDA AND _cuda_inc AND EXISTS ${_nv}/nccl/include/nccl.h)
  list(GET _cuda_inc 0 _cuda_inc)
  if(EXISTS ${_cuda_inc}/crt/host_config.h AND EXISTS ${_cuda_inc}/nv/target)
    set(BURST_NCCL ON)
    set(BURST_NCCL_INCLUDE_DIRS ${_cuda_inc} ${_nv}/nccl/include)
  endif()
endif()
message(STATUS "libtorch ${_v} from ${_tp}: CUDA ${BURST_TORCH_HAS_CUDA}, NCCL ${BURST_NCCL}, CXX11 ABI ${BURST_TORCH_CXX11_ABI}")
