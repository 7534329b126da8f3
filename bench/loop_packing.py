"""Packed rows in a training loop's forward and forward_backward: datums that
share a prompt (a group of completions) computed with the prompt once,
against the same datums made to share nothing, in the same run.

Starts `burst serve` (one slot, one thread), then, alternating, times on the
worker (the answer's compute_ms):
- scoring: `forward` on 48 held-out support tickets x the 6 labels (288
  datums that share each ticket's prompt: how examples/loops measures
  held-out accuracy);
- rl group: `forward_backward` (importance_sampling) on 16 tickets x 4 label
  completions, as an RL step sends them;
each beside its peer: the same datums with their first token made distinct
(same lengths, same token count, nothing shared: end to end in one row).

    .venv/bin/python bench/loop_packing.py [--n 5]   (BURST_BINARY: default build/src/burst)
"""
import argparse
import os
import statistics
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "examples", "loops"))
from loop_overhead import start, stop  # noqa: E402
from common import LABELS, Task, tickets  # noqa: E402  (examples/loops: the tickets as token data)
import burst  # noqa: E402
from raw_loop import RawLoop, datum  # noqa: E402  (plain JSON: the answers' `burst` object)


def datums(task, rows, labels, rl):
    out = []
    for t in rows:
        p = task.prompt(t)
        for label in labels:
            seq = p + task.label_tokens[label]
            inputs = {"target_tokens": seq[1:]}
            if rl:
                n = len(seq) - 1
                c = len(task.label_tokens[label])
                inputs["logprobs"] = [0.0] * n
                inputs["advantages"] = [0.0] * (n - c) + [0.5] * c
            out.append((seq[:-1], inputs))
    return out


def unshared(data):
    # The first token of each datum distinct: no two datums share a prefix.
    return [([5 + i] + toks[1:], inputs) for i, (toks, inputs) in enumerate(data)]


def as_datums(data):
    return [datum(toks, **inputs) for toks, inputs in data]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=5, help="timed requests of each kind")
    args = ap.parse_args()
    proc, d, log, url, key = start()
    try:
        loop = RawLoop(url, key, rank=8, seed=0)
        task = Task(burst.BurstClient(base_url=url, api_key=key).tokenizer("burst-small"))
        cases = {
            "scoring (forward, 48 x 6)": ("forward", datums(task, tickets("valid", 48), LABELS, False)),
            "rl group (forward_backward, 16 x 4)": ("forward_backward",
                                                    datums(task, tickets("train", 16), LABELS[:4], True)),
        }

        def timed(kind, data):
            ds = as_datums(data)
            rid = loop.forward(ds) if kind == "forward" else loop.forward_backward(ds, "importance_sampling")
            return loop.result(rid)["burst"]["compute_ms"]

        print(f"{'case':<38} {'tokens':>7} {'shared ms':>10} {'unshared ms':>12} {'speed-up':>9}")
        for name, (kind, data) in cases.items():
            peer = unshared(data)
            timed(kind, data), timed(kind, peer)  # warm
            shared_ms, peer_ms = [], []
            for _ in range(args.n):
                shared_ms.append(timed(kind, data))
                peer_ms.append(timed(kind, peer))
            a, b = statistics.median(shared_ms), statistics.median(peer_ms)
            tokens = sum(len(t) for t, _ in data)
            print(f"{name:<38} {tokens:>7} {a:>10.0f} {b:>12.0f} {b / a:>8.2f}x", flush=True)
        loop.close()
    finally:
        stop(proc, d, log)


if __name__ == "__main__":
    main()
