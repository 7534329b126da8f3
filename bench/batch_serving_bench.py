#!/usr/bin/python3
"""Concurrent calls on one deployment replica: decoded as one batch
(continuous batching) against the same calls served one at a time, in the
same run, on a real `burst serve`. docs/bench.md, "Batched decoding".
Standard library only.

  burst serve --data TMP --listen 127.0.0.1:0 --slots 2 --threads-per-slot T

Two deployments of the shipped base model, one replica each, kept warm
(min_replicas 1): "batched" (max_concurrency = --calls: the replica decodes
them together) and "single" (max_concurrency 1). Each round sends --calls
streamed completion calls to each (the order alternates by round): all at
once to "batched", one after another to "single" (call k when call k-1 has
its answer: a replica without batching serves them so, and more than 8
calls cannot wait for a replica at once anyway, 429). The calls: the first
--calls tickets of examples/support/valid.jsonl as text (system + user
message; the base model's chat answers end after a word or two, text runs
on), max_tokens --max-tokens, temperature 0.8, a seed per call. Per side:
served tokens/s = completion tokens (the usage chunk of each stream) / wall
time from the round's start to its last answer; time to first token (TTFT)
per call = from the round's start to the call's first streamed text.

Prints one JSON line per round and side, and a summary last."""

import argparse
import json
import os
import statistics
import sys
import tempfile
import threading
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from burst_api import Api, Server, wait_for  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def stream_call(api, model, prompt, max_tokens, seed, t0, out, k):
    body = json.dumps({"model": model, "prompt": prompt, "max_tokens": max_tokens, "temperature": 0.8,
                       "seed": seed, "stream": True, "stream_options": {"include_usage": True}}).encode()
    req = urllib.request.Request(api.base + "/v1/completions", data=body, method="POST", headers={
        "Authorization": "Bearer " + api.key, "Content-Type": "application/json"})
    first, tokens = None, 0
    with urllib.request.urlopen(req, timeout=600) as r:
        for raw in r:
            line = raw.decode().strip()
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            chunk = json.loads(line[6:])
            if first is None and any(c.get("text") for c in chunk.get("choices", [])):
                first = time.perf_counter() - t0
            if chunk.get("usage"):
                tokens = chunk["usage"]["completion_tokens"]
    out[k] = (first if first is not None else time.perf_counter() - t0, tokens)


def round_of(api, model, calls, max_tokens, seed0, at_once):
    out = [None] * len(calls)
    t0 = time.perf_counter()
    if at_once:
        threads = [threading.Thread(target=stream_call, args=(api, model, m, max_tokens, seed0 + k, t0, out, k))
                   for k, m in enumerate(calls)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    else:  # in turn: call k goes when call k-1 has its answer
        for k, m in enumerate(calls):
            stream_call(api, model, m, max_tokens, seed0 + k, t0, out, k)
    wall = time.perf_counter() - t0
    if any(o is None for o in out):
        raise RuntimeError("a call to %s failed" % model)
    tokens = sum(o[1] for o in out)
    ttft = sorted(o[0] for o in out)
    return {"tokens": tokens, "wall_s": wall, "tok_s": tokens / wall, "ttft_p50_s": statistics.median(ttft),
            "ttft_max_s": ttft[-1]}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--burst", default=os.path.join(ROOT, "build/src/burst"))
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--calls", type=int, default=16)
    ap.add_argument("--max-tokens", type=int, default=128)
    ap.add_argument("--rounds", type=int, default=3)
    a = ap.parse_args()

    calls = []
    with open(os.path.join(ROOT, "examples/support/valid.jsonl")) as f:
        for line in f:
            msgs = [m["content"] for m in json.loads(line)["messages"] if m["role"] != "assistant"]
            calls.append("\n".join(msgs) + "\n")
            if len(calls) == a.calls:
                break
    data = tempfile.mkdtemp(prefix="burst-batch-bench-")
    srv = Server(a.burst, data, 60, 2, a.threads)
    api = Api(srv.url, srv.key)
    try:
        for name, conc in (("batched", a.calls), ("single", 1)):
            api.ok("POST", "/v1/deployments", {"name": name, "checkpoint": "burst-small", "min_replicas": 1,
                                               "max_replicas": 1, "max_concurrency": conc,
                                               "scaledown_window_s": 600, "scope": "dedicated"})
        for name in ("batched", "single"):
            wait_for(name + "'s replica", lambda n=name: api.ok("GET", "/v1/deployments/" + n)["ready_replicas"] >= 1,
                     120, 0.1)
            round_of(api, name, calls[:2], 4, 0, True)  # warm-up
        results = {"batched": [], "single": []}
        for i in range(a.rounds):
            for name in (("batched", "single") if i % 2 == 0 else ("single", "batched")):
                r = round_of(api, name, calls, a.max_tokens, 1000 * i, name == "batched")
                r.update({"series": name, "round": i})
                results[name].append(r)
                print(json.dumps(r), flush=True)
        med = {n: {k: statistics.median(x[k] for x in rs) for k in ("tok_s", "ttft_p50_s", "ttft_max_s", "tokens")}
               for n, rs in results.items()}
        print(json.dumps({"calls": a.calls, "max_tokens": a.max_tokens, "threads_per_slot": a.threads,
                          "batched": med["batched"], "single": med["single"],
                          "speedup": med["batched"]["tok_s"] / med["single"]["tok_s"]}))
        for name in ("batched", "single"):
            api.ok("DELETE", "/v1/deployments/" + name)
    finally:
        srv.stop()


if __name__ == "__main__":
    main()
