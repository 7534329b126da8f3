"""A training loop's step through the Tinker protocol against the same step
inside `burst train`: the loop's price for being a service.

The same work both ways: burst-small, LoRA rank 8 on the attention and MLP
projections, batches of B support tickets (the chat template, loss on the
assistant's answer), Adam at a constant rate, one thread per worker.
  - `burst train` on the first N*B tickets (a file of exactly them): each
    step's step_s from its metrics.jsonl (the step's compute and the
    optimizer, nothing else);
  - the real tinker SDK against `burst serve` (one slot, one thread), the
    same tickets tokenized by Burst's /v1/tokenize: per step, the client's
    wall time from sending forward_backward to optim_step's result (the
    SDK, HTTP, the control plane's journal and queue, the worker's lease,
    the data's way there).
The first W steps of each are left out (warm-up). Printed: both medians,
the ratio, and the tokens per step on each side (equal, or the comparison
says so).

    .venv/bin/python bench/loop_vs_train.py [--steps 30] [--batch 8] [--warm 3]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
sys.path.insert(0, os.path.join(ROOT, "bench"))

import tinker  # noqa: E402
from tinker import types  # noqa: E402

from burst_api import Api, Server  # noqa: E402

BINARY = os.environ.get("BURST_BINARY", os.path.join(ROOT, "build", "src", "burst"))
TARGETS = ["q", "k", "v", "o", "gate", "up", "down"]  # a loop's train_attn + train_mlp
LR = 1e-3


def tickets(n):
    with open(os.path.join(ROOT, "examples", "support", "train.jsonl")) as f:
        return [json.loads(line) for _, line in zip(range(n), f)]


def train_steps(rows, batch, steps, tmp):
    """burst train on exactly `rows`: step_s and tokens of each step."""
    data = os.path.join(tmp, "train.jsonl")
    with open(data, "w") as f:
        f.writelines(json.dumps(r) + "\n" for r in rows)
    recipe = {"model": "burst-small", "train_file": data, "method": "lora",
              "lora": {"rank": 8, "alpha": 16, "dropout": 0.0, "targets": TARGETS},
              "learning_rate": LR, "schedule": {"kind": "constant"}, "batch_size": batch, "epochs": 1,
              "max_seq_len": 256, "checkpoint_every": 0, "seed": 0, "threads": 1}
    path = os.path.join(tmp, "recipe.json")
    with open(path, "w") as f:
        json.dump(recipe, f)
    out = os.path.join(tmp, "run")
    subprocess.run([BINARY, "train", "--config", path, "--out", out], check=True, stdout=subprocess.DEVNULL)
    with open(os.path.join(out, "metrics.jsonl")) as f:
        lines = [json.loads(line) for line in f]
    train = [m for m in lines if m.get("type") == "train"][:steps]
    tokens, before = [], 0
    for m in train:
        tokens.append(m["tokens"] - before)
        before = m["tokens"]
    return [m["step_s"] for m in train], tokens


def loop_steps(server, rows, batch, steps):
    """The same batches through the SDK: wall seconds and tokens of each step."""
    api = Api(server.url, server.key)
    datums = []
    for r in rows:
        code, t = api.call("POST", "/v1/tokenize", {"model": "burst-small", "messages": r["messages"]})
        if code != 200:
            raise RuntimeError(f"/v1/tokenize: HTTP {code} {t}")
        toks, weights = t["tokens"][:256], t["weights"][:256]
        datums.append(types.Datum(model_input=types.ModelInput.from_ints(toks[:-1]),
                                  loss_fn_inputs={"target_tokens": toks[1:], "weights": weights[1:]}))
    sc = tinker.ServiceClient(base_url=server.url, api_key="tml-" + server.key)
    made = sc.create_lora_training_client(base_model="burst-small", rank=8, seed=0, train_unembed=False)
    tc = made.result() if hasattr(made, "result") else made
    walls, tokens = [], []
    for s in range(steps):
        b = datums[s * batch:(s + 1) * batch]
        t0 = time.perf_counter()
        fb = tc.forward_backward(b, "cross_entropy")
        tc.optim_step(types.AdamParams(learning_rate=LR)).result()
        fb.result()
        walls.append(time.perf_counter() - t0)
        tokens.append(sum(d.model_input.length + 1 for d in b))
    sc.close("success") if hasattr(sc, "close") else None
    return walls, tokens


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--warm", type=int, default=3)
    a = ap.parse_args()
    rows = tickets(a.steps * a.batch)
    with tempfile.TemporaryDirectory(prefix="burst-bench-loop-train-") as tmp:
        train_s, train_tok = train_steps(rows, a.batch, a.steps, tmp)
        server = Server(BINARY, os.path.join(tmp, "data"), window=600, slots=1, threads_per_slot=1)
        try:
            loop_s, loop_tok = loop_steps(server, rows, a.batch, a.steps)
        finally:
            server.stop()
    t = statistics.median(train_s[a.warm:])
    lo = statistics.median(loop_s[a.warm:])
    same = sorted(train_tok) == sorted(loop_tok)
    print(f"steps {a.steps} (first {a.warm} left out), batch {a.batch} tickets, burst-small LoRA rank 8, 1 thread")
    print(f"tokens per step: burst train median {statistics.median(train_tok):.0f}, "
          f"loop median {statistics.median(loop_tok):.0f} ({'the same batches' if same else 'NOT the same'})")
    print(f"burst train step (step_s)      median {t * 1000:8.1f} ms")
    print(f"loop step (client wall, SDK)   median {lo * 1000:8.1f} ms")
    print(f"loop / train: {lo / t:.3f} (overhead {100 * (lo / t - 1):+.1f}%; goal: at most +5%)")


if __name__ == "__main__":
    main()
