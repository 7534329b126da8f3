"""Thread setup shared by the PyTorch peers, the same as Burst's SetCpuThreads.

torch.set_num_threads does not reach OpenBLAS (a PyTorch on OpenBLAS uses it for
GEMMs, with its own thread pool of one thread per core by default), so the
peer sets both, exactly as Burst does (src/model/cpu_threads.h).
"""

import ctypes

import torch


def _openblas():
    """The OpenBLAS that this process (through torch) has loaded, or None."""
    with open("/proc/self/maps") as f:
        paths = {line.split()[-1] for line in f if "libopenblas" in line}
    for path in sorted(paths):
        try:
            lib = ctypes.CDLL(path)  # already loaded: the same library, not a second copy
            lib.openblas_set_num_threads  # noqa: B018  (raises AttributeError if absent)
            return lib
        except (OSError, AttributeError):
            continue
    return None


def set_threads(n):
    """Intra-op, inter-op and OpenBLAS threads to n."""
    torch.set_num_threads(n)
    try:
        torch.set_num_interop_threads(n)
    except RuntimeError:
        pass
    lib = _openblas()
    if lib is not None:
        lib.openblas_set_num_threads(ctypes.c_int(n))


def blas_threads():
    lib = _openblas()
    return int(lib.openblas_get_num_threads()) if lib is not None else -1


def blas_core():
    """The kernel set OpenBLAS runs ("SkylakeX", "Prescott"...), or "" when not OpenBLAS."""
    lib = _openblas()
    if lib is None:
        return ""
    lib.openblas_get_corename.restype = ctypes.c_char_p
    return lib.openblas_get_corename().decode()
