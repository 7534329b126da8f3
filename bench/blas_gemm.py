#!/usr/bin/env python3
"""Which BLAS libtorch's float32 GEMMs should run on: PyPI's libtorch (MKL
inside it) against the same libtorch with Debian's OpenBLAS loaded ahead of
it (libtorch's Fortran BLAS symbols are looked up like any other, so
OpenBLAS then takes its GEMMs), at 1 and 2 threads, on the shapes Burst's
training runs (the 100M preset's projections and LM head) and a square one.

Each configuration runs in a child process of the project's Python, in turn,
ROUNDS times; the table gives GFLOP/s medians and OpenBLAS / MKL.

  .venv/bin/python bench/blas_gemm.py [--rounds 3] [--seconds 1.0]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys

OPENBLAS = "/usr/lib/x86_64-linux-gnu/libopenblas.so.0"
SHAPES = [(512, 512, 512), (2048, 768, 768), (2048, 768, 3072), (2048, 3072, 768), (4096, 1024, 32000)]

CHILD = r"""
import json, sys, time, torch
threads, seconds = int(sys.argv[1]), float(sys.argv[2])
torch.set_num_threads(threads)
out = {}
for m, k, n in json.loads(sys.argv[3]):
    a, b = torch.randn(m, k), torch.randn(k, n)
    for _ in range(2):
        a @ b
    t, r = time.perf_counter(), 0
    while time.perf_counter() - t < seconds:
        a @ b
        r += 1
    out[f"{m}x{k}x{n}"] = 2 * m * k * n * r / (time.perf_counter() - t) / 1e9
print(json.dumps(out))
"""


def run(blas, threads, seconds):
    env = dict(os.environ, OMP_NUM_THREADS=str(threads), OPENBLAS_NUM_THREADS=str(threads))
    if blas == "openblas":
        env["LD_PRELOAD"] = OPENBLAS
    out = subprocess.run([sys.executable, "-c", CHILD, str(threads), str(seconds), json.dumps(SHAPES)],
                         env=env, check=True, capture_output=True, text=True).stdout
    return json.loads(out)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--seconds", type=float, default=1.0)
    a = ap.parse_args()
    if not os.path.exists(OPENBLAS):
        sys.exit(f"{OPENBLAS} is missing (apt install libopenblas0)")
    rows = []
    for threads in (1, 2):
        got = {"mkl": [], "openblas": []}
        for _ in range(a.rounds):
            for blas in got:
                got[blas].append(run(blas, threads, a.seconds))
        for shape in got["mkl"][0]:
            mkl = statistics.median(r[shape] for r in got["mkl"])
            ob = statistics.median(r[shape] for r in got["openblas"])
            rows.append({"threads": threads, "shape": shape, "mkl": mkl, "openblas": ob, "ratio": ob / mkl})
    print("| threads | m x k x n | MKL GFLOP/s | OpenBLAS GFLOP/s | OpenBLAS / MKL |", file=sys.stderr)
    print("| --- | --- | --- | --- | --- |", file=sys.stderr)
    for r in rows:
        print(f"| {r['threads']} | {r['shape']} | {r['mkl']:.0f} | {r['openblas']:.0f} | {r['ratio']:.2f} |",
              file=sys.stderr)
    print(json.dumps(rows))


if __name__ == "__main__":
    main()
