#!/usr/bin/python3
"""Deployments on a real `burst serve`: cold start, warm latency, and the
sampling tokens/s one replica serves. docs/bench.md, "Deployments".
Standard library only.

  burst serve --data TMP --listen 127.0.0.1:0 --slots 2 --threads-per-slot T
              --scaledown-window 1

(2 slots: the deployment's replica holds one, the pinned peer calls below
get the other; a replica serves its deployment only.)

trains one small LoRA job (max_steps 8) on the support data, then deploys its
final checkpoint as "bench" (min_replicas 0, max_replicas 1, window 1 s,
dedicated scope) and measures, with the same chat request each time
(temperature 0, one user message from examples/support/ticket.json):

  cold    --cold times: wait until GET /v1/workers is empty, then one call
          (max_tokens 16); the client's latency, and the response's
          burst.cold_start_ms (waiting for the replica plus its model load).
  warm    --warm calls (max_tokens 16) one after another on the live replica;
          the client's latency. Peer: the same call pinned to the checkpoint
          name (JOB:step-N, the plain sampling path on the same warm worker),
          interleaved, so the ratio deployment/pinned is what routing by
          deployment costs.
  load    --concurrency completions at once, --rounds times (POST
          /v1/completions on the deployment, prompt "The word", max_tokens
          64, temperature 0.8, a seed per call: text that runs to max_tokens
          rather than a label and an end token); served tokens/s =
          completion tokens / wall time. Peer: the sampler's own
          rate inside the worker (completion tokens / the calls' run_ms sum),
          so served/compute is the serving path's efficiency.

Prints JSON lines; the last is the summary."""

import argparse
import json
import os
import statistics
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from burst_api import Api, Server, wait_for  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100.0 * (len(xs) - 1))))]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--burst", default=os.path.join(ROOT, "build/src/burst"))
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--cold", type=int, default=5)
    ap.add_argument("--warm", type=int, default=20)
    ap.add_argument("--concurrency", type=int, default=4)
    ap.add_argument("--rounds", type=int, default=3)
    a = ap.parse_args()

    data = tempfile.mkdtemp(prefix="burst-deploy-bench-")
    srv = Server(a.burst, data, 1, 2, a.threads)
    api = Api(srv.url, srv.key)
    try:
        with open(os.path.join(ROOT, "examples/support/train.jsonl"), "rb") as f:
            train = api.upload("train.jsonl", f.read())
        job = api.ok("POST", "/v1/fine_tuning/jobs", {
            "model": "burst-small", "training_file": train,
            "recipe": {"max_steps": 8, "batch_size": 8, "max_seq_len": 128, "checkpoint_every": 8}})
        job = wait_for("the job", lambda: (lambda j: j if j["status"] in ("succeeded", "failed") else None)(
            api.ok("GET", "/v1/fine_tuning/jobs/" + job["id"])), 300, 0.2)
        if job["status"] != "succeeded":
            raise RuntimeError("job failed: %s" % job)
        ckpt = job["fine_tuned_model"]
        api.ok("POST", "/v1/deployments", {"name": "bench", "checkpoint": ckpt, "max_replicas": 1,
                                           "scaledown_window_s": 1, "scope": "dedicated"})
        with open(os.path.join(ROOT, "examples/support/ticket.json")) as f:
            ticket = json.load(f)
        messages = ticket["messages"] if isinstance(ticket, dict) else ticket

        def chat(model, max_tokens):
            t0 = time.perf_counter()
            status, out = api.call("POST", "/v1/chat/completions", {
                "model": model, "messages": messages, "temperature": 0, "max_tokens": max_tokens}, timeout=300)
            if status != 200:
                raise RuntimeError("chat: %s %s" % (status, out))
            return (time.perf_counter() - t0) * 1000.0, out

        cold_ms, cold_reported = [], []
        for _ in range(a.cold):
            wait_for("an empty pool", lambda: not api.ok("GET", "/v1/workers")["data"], 60, 0.1)
            ms, out = chat("bench", 16)
            if not out["burst"]["cold_start"]:
                raise RuntimeError("expected a cold start: %s" % out["burst"])
            cold_ms.append(ms)
            cold_reported.append(out["burst"]["cold_start_ms"])
            print(json.dumps({"series": "cold", "latency_ms": ms, "cold_start_ms": out["burst"]["cold_start_ms"]}))
        # Warm: the replica is live; interleave with the pinned checkpoint name.
        chat("bench", 16)
        warm, pinned = [], []
        for i in range(a.warm):
            for series, model in (("deployment", "bench"), ("pinned", ckpt)) if i % 2 == 0 else (
                    ("pinned", ckpt), ("deployment", "bench")):
                ms, out = chat(model, 16)
                (warm if series == "deployment" else pinned).append(ms)
        print(json.dumps({"series": "warm", "deployment_ms": warm, "pinned_ms": pinned}))
        # Load: concurrent calls on one replica.
        served, compute = [], []
        for _ in range(a.rounds):
            outs = [None] * a.concurrency

            def one(k):
                status, out = api.call("POST", "/v1/completions", {
                    "model": "bench", "prompt": "The word", "max_tokens": 64, "temperature": 0.8,
                    "seed": k + 1}, timeout=300)
                if status != 200:
                    raise RuntimeError("completion: %s %s" % (status, out))
                outs[k] = out
            t0 = time.perf_counter()
            threads = [threading.Thread(target=one, args=(k,)) for k in range(a.concurrency)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            wall = time.perf_counter() - t0
            tokens = sum(o["usage"]["completion_tokens"] for o in outs)
            run_s = sum(o["burst"]["run_ms"] for o in outs) / 1000.0
            served.append(tokens / wall)
            compute.append(tokens / run_s)
            print(json.dumps({"series": "load", "tokens": tokens, "wall_s": wall, "served_tok_s": tokens / wall,
                              "compute_tok_s": tokens / run_s}))
        d = api.ok("GET", "/v1/deployments/bench")
        summary = {
            "threads_per_slot": a.threads,
            "cold_latency_p50_ms": statistics.median(cold_ms),
            "cold_start_reported_p50_ms": statistics.median(cold_reported),
            "warm_deployment_p50_ms": statistics.median(warm), "warm_deployment_p99_ms": pct(warm, 99),
            "warm_pinned_p50_ms": statistics.median(pinned),
            "warm_ratio_deployment_over_pinned": statistics.median(warm) / statistics.median(pinned),
            "served_tok_s_median": statistics.median(served), "compute_tok_s_median": statistics.median(compute),
            "served_over_compute": statistics.median(served) / statistics.median(compute),
            "deployment_requests": d["requests"], "deployment_cold_starts": d["cold_starts"],
            "deployment_cost": d["cost"], "replica_seconds": d["replica_seconds"],
        }
        print(json.dumps(summary))
        api.ok("DELETE", "/v1/deployments/bench")
    finally:
        srv.stop()


if __name__ == "__main__":
    main()
