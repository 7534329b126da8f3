"""A training loop step's overhead: request to result minus compute, warm.

Starts `burst serve` (one slot), warms a run, then times N optim_steps and N
forward_backwards on a small datum, one at a time, in the protocol's JSON
(bench/raw_loop.py): the client's wall time per request (submit + retrieve_future), the
server's request_to_result_ms, and the worker's compute_ms (both from the
answer's `burst` object). Overhead = request_to_result - compute (the
control plane's queue, dispatch to the warm worker, the answer's way back);
the client adds two HTTP round trips, measured by the peer in the same run:
GET /v1/health.

    /usr/bin/python3 bench/loop_overhead.py [--n 200]   (BURST_BINARY: default build/src/burst)
"""
import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
sys.path.insert(0, os.path.join(ROOT, "bench"))
from raw_loop import RawLoop, datum  # noqa: E402  (plain JSON: the answers' `burst` object)


def start():
    d = tempfile.mkdtemp(prefix="burst-bench-loops-")
    binary = os.environ.get("BURST_BINARY", os.path.join(ROOT, "build", "src", "burst"))
    log = open(os.path.join(d, "serve.log"), "wb")
    p = subprocess.Popen([binary, "serve", "--data", os.path.join(d, "data"), "--listen", "127.0.0.1:0", "--slots",
                          "1", "--threads-per-slot", "1", "--scaledown-window", "600"], stdout=subprocess.PIPE,
                         stderr=log)
    while True:
        line = p.stdout.readline()
        m = re.search(rb"listening on (http://127\.0\.0\.1:[0-9]+)", line)
        if m:
            break
        if p.poll() is not None:
            sys.exit("burst serve did not start")
    # Its access log goes on: read, or a full pipe stalls every request.
    threading.Thread(target=lambda: [log.write(chunk) for chunk in iter(lambda: p.stdout.read1(1 << 16), b"")],
                     daemon=True).start()
    key = open(os.path.join(d, "data", "admin.key")).read().strip()
    return p, d, log, m.group(1).decode(), key


def stop(proc, d, log):
    proc.terminate()
    proc.wait(60)
    log.close()
    proc.stdout.close()
    shutil.rmtree(d, ignore_errors=True)


def pct(xs, q):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=200)
    args = ap.parse_args()
    proc, d, log, url, key = start()
    try:
        loop = RawLoop(url, key, rank=8, seed=0)
        d = datum(list(range(5, 21)), target_tokens=list(range(6, 22)), weights=[1.0] * 16)
        for _ in range(10):  # warm: the worker started, the run held
            loop.result(loop.forward_backward([d]))
            loop.result(loop.optim_step())
        http = loop.http
        rows = {}
        for name in ("optim_step", "forward_backward"):
            wall, server, compute = [], [], []
            for _ in range(args.n):
                t0 = time.perf_counter()
                rid = loop.optim_step(0.0) if name == "optim_step" else loop.forward_backward([d])
                r = loop.result(rid)
                wall.append((time.perf_counter() - t0) * 1000)
                server.append(r["burst"]["request_to_result_ms"])
                compute.append(r["burst"]["compute_ms"])
            rows[name] = (wall, server, compute)
        health = []
        for _ in range(args.n):
            t0 = time.perf_counter()
            http.get("/v1/health")
            health.append((time.perf_counter() - t0) * 1000)
        rt = statistics.median(health)
        print(f"peer: GET /v1/health round trip median {rt:.2f} ms (the client's two round trips cost about twice this)")
        print(f"{'request':<18} {'client wall':>12} {'server req->result':>19} {'compute':>9} "
              f"{'overhead p50':>13} {'p90':>7} {'overhead / round trip':>22}")
        for name, (wall, server, compute) in rows.items():
            over = [s - c for s, c in zip(server, compute)]
            print(f"{name:<18} {statistics.median(wall):>10.2f}ms {statistics.median(server):>17.2f}ms "
                  f"{statistics.median(compute):>7.2f}ms {statistics.median(over):>11.2f}ms {pct(over, 0.9):>5.2f}ms "
                  f"{statistics.median(over) / rt:>21.2f}x")
        loop.close()
    finally:
        stop(proc, d, log)


if __name__ == "__main__":
    main()
