#!/usr/bin/env python3
"""The machine's facts for scripts/gpu-check.sh, as one JSON object: what
the GPU check was planned for (an H200, CUDA 13's nvcc, PyTorch 2.11 with
libtorch, Python 3.12, transformers and peft, CMake and ninja) and, under
"differs", each way this machine is not that. Also where the build finds
libtorch (torch_dir), its C++ ABI and CUDA's runtime headers.

    python3 scripts/gpu_facts.py cuda|cpu
"""
import json
import os
import platform
import re
import shutil
import subprocess
import sys


def run(*cmd):
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=30)
        return (r.stdout + r.stderr).strip()
    except Exception as e:  # a missing tool is a fact too
        return "unavailable: %s" % e


def version_of(package):
    # The installed distribution's version, without importing it (importing
    # transformers takes seconds of a lent machine's minutes).
    from importlib import metadata
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return None


def op_latency_us(torch):
    """Microseconds per tiny GPU op issued back to back (dispatch + launch;
    the work itself is one element), and per op inside a replayed CUDA graph:
    how much a step of many small kernels (decoding one token) pays for
    issuing them on this machine."""
    import time
    x = torch.zeros(1, device="cuda")
    n = 2000
    for _ in range(100):
        x.add_(1)
    torch.cuda.synchronize()
    t = time.perf_counter()
    for _ in range(n):
        x.add_(1)
    torch.cuda.synchronize()
    eager = (time.perf_counter() - t) / n * 1e6
    out = {"eager": round(eager, 2)}
    try:
        g = torch.cuda.CUDAGraph()
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            for _ in range(3):
                x.add_(1)
        torch.cuda.current_stream().wait_stream(s)
        with torch.cuda.graph(g):
            for _ in range(200):
                x.add_(1)
        g.replay()
        torch.cuda.synchronize()
        t = time.perf_counter()
        for _ in range(10):
            g.replay()
        torch.cuda.synchronize()
        out["graph"] = round((time.perf_counter() - t) / 2000 * 1e6, 2)
    except Exception as e:  # a fact, not a failure
        out["graph_error"] = str(e)[:200]
    return out


def main():
    device = sys.argv[1] if len(sys.argv) > 1 else "cuda"
    f = {"device": device, "date": run("date", "-u", "+%Y-%m-%dT%H:%M:%SZ"),
         "host": platform.node(), "cpus": os.cpu_count(),
         "python": platform.python_version(), "python_path": sys.executable}
    try:
        with open("/proc/meminfo") as m:
            f["mem_total_gib"] = round(int(m.readline().split()[1]) / 2**20, 1)
    except OSError:
        pass
    f["gpu"] = run("nvidia-smi", "--query-gpu=name,driver_version,memory.total", "--format=csv,noheader")
    nvcc = run("nvcc", "--version")
    m = re.search(r"release ([0-9.]+)", nvcc)
    f["nvcc"] = m.group(1) if m else nvcc[-200:]
    f["cmake"] = run("cmake", "--version").splitlines()[0] if shutil.which("cmake") else None
    f["ninja"] = run("ninja", "--version") if shutil.which("ninja") else None
    f["cxx"] = run("c++", "--version").splitlines()[0] if shutil.which("c++") else None
    try:
        import torch
        f["torch"] = torch.__version__
        f["torch_cuda"] = torch.version.cuda
        f["torch_dir"] = os.path.dirname(torch.__file__)
        f["torch_cmake_prefix_path"] = getattr(torch.utils, "cmake_prefix_path", None)
        f["torch_cxx11_abi"] = int(torch._C._GLIBCXX_USE_CXX11_ABI)
        f["cuda_available"] = torch.cuda.is_available()
        if torch.cuda.is_available():
            f["torch_gpu"] = torch.cuda.get_device_name(0)
            f["gpu_mem_gib"] = round(torch.cuda.get_device_properties(0).total_memory / 2**30, 1)
            f["op_latency_us"] = op_latency_us(torch)
    except Exception as e:
        f["torch"] = "error: %s" % e
    for name in ("transformers", "peft", "safetensors", "tokenizers", "sentencepiece"):
        f[name] = version_of(name)
    differs = []
    if device == "cuda":
        if "H200" not in f["gpu"]:
            differs.append("GPU: %s (planned: NVIDIA H200)" % f["gpu"])
        if not str(f["nvcc"]).startswith("13"):
            differs.append("nvcc: %s (planned: CUDA 13)" % f["nvcc"])
        if not str(f.get("torch", "")).startswith("2.11"):
            differs.append("torch: %s (planned: 2.11)" % f.get("torch"))
        if not f.get("torch_cmake_prefix_path"):
            differs.append("torch.utils.cmake_prefix_path missing")
        for name in ("transformers", "peft"):
            if not f.get(name):
                differs.append("%s not installed: no Hugging Face peer" % name)
    if not f["python"].startswith("3.12"):
        differs.append("python: %s (planned: 3.12)" % f["python"])
    for tool in ("cmake", "ninja"):
        if not f[tool]:
            differs.append("%s not found" % tool)
    f["differs"] = differs
    print(json.dumps(f, indent=1))


if __name__ == "__main__":
    main()
