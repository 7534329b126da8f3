"""A training loop's step through the Tinker protocol against the same step
inside `burst train`: the loop's price for being a service.

The same work both ways: burst-small, LoRA rank 8 on the attention and MLP
projections, batches of B support tickets (the chat template, loss on the
assistant's answer), Adam at a constant rate, one thread per worker.
  - `burst train` on the first N*B tickets (a file of exactly them), run
    before the loop and again after it: each step's step_s from its
    metrics.jsonl (the step's compute and the optimizer, nothing else);
  - the real tinker SDK against `burst serve` (one slot, one thread), the
    same tickets tokenized by Burst's /v1/tokenize: per step, the client's
    wall time from sending forward_backward to optim_step's result (the
    SDK, HTTP, the control plane's journal and queue, the worker's lease,
    the data's way there).
The first W steps of each are left out (warm-up); `burst train` shuffles
its batches, so each side is timed per token over the rest. Two kinds of
data: chat (loss on the answer only: `burst train` runs the last layer and
the LM head on the answer's positions alone, while the protocol's
forward_backward returns every token's log-probability) and text (loss on
every token: the same computation on both sides).

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
    """burst train on exactly `rows` (its data lines): step_s and tokens of each step."""
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
    subprocess.run([BINARY, "train", "--config", path, "--out", out, "--overwrite"], check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    with open(os.path.join(out, "metrics.jsonl")) as f:
        lines = [json.loads(line) for line in f]
    train = [m for m in lines if m.get("type") == "train"][:steps]
    tokens, before = [], 0
    for m in train:
        tokens.append(m["tokens"] - before)
        before = m["tokens"]
    return [m["step_s"] for m in train], tokens


def datum_of(api, row):
    """A train data line as the loop's datum: the same tokens, the same loss weights."""
    if "messages" in row:  # the chat template; loss on the assistant's answer
        code, t = api.call("POST", "/v1/tokenize", {"model": "burst-small", "messages": row["messages"]})
        toks, weights = t.get("tokens", []), t.get("weights", [])
    else:  # text: BOS + text + EOS, loss on every token (as burst train reads a text line)
        code, t = api.call("POST", "/v1/tokenize", {"model": "burst-small", "text": row["text"]})
        toks = [1] + t.get("tokens", []) + [2]
        weights = [1.0] * len(toks)
    if code != 200:
        raise RuntimeError(f"/v1/tokenize: HTTP {code} {t}")
    toks, weights = toks[:256], weights[:256]
    return types.Datum(model_input=types.ModelInput.from_ints(toks[:-1]),
                       loss_fn_inputs={"target_tokens": toks[1:], "weights": weights[1:]})


def loop_steps(server, rows, batch, steps):
    """The same batches through the SDK: wall seconds and tokens of each step."""
    api = Api(server.url, server.key)
    datums = [datum_of(api, r) for r in rows]
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
    return walls, tokens


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--warm", type=int, default=3)
    a = ap.parse_args()
    chats = tickets(a.steps * a.batch)
    texts = [{"text": " ".join(m["content"] for m in r["messages"])} for r in chats]
    print(f"steps {a.steps} (first {a.warm} left out), batch {a.batch} tickets, burst-small LoRA rank 8, 1 thread")
    print(f"{'data':<34} {'tokens/step':>11} {'burst train':>12} {'loop':>9} {'loop/train':>11}  (per 1,000 tokens)")
    with tempfile.TemporaryDirectory(prefix="burst-bench-loop-train-") as tmp:
        server = Server(BINARY, os.path.join(tmp, "data"), window=600, slots=1, threads_per_slot=1)
        try:
            for name, rows in (("chat (loss on the answer)", chats), ("text (loss on every token)", texts)):
                # burst train before and after the loop, so a drift of the
                # machine's speed weighs on both sides alike.
                train_s, train_tok = train_steps(rows, a.batch, a.steps, tmp)
                loop_s, loop_tok = loop_steps(server, rows, a.batch, a.steps)
                again_s, again_tok = train_steps(rows, a.batch, a.steps, tmp)
                # burst train shuffles its batches: per token, over the steps after the warm-up.
                t = (sum(train_s[a.warm:]) + sum(again_s[a.warm:])) / (sum(train_tok[a.warm:]) +
                                                                      sum(again_tok[a.warm:])) * 1e6
                lo = sum(loop_s[a.warm:]) / sum(loop_tok[a.warm:]) * 1e6
                tok = f"{statistics.median(train_tok):.0f}"
                print(f"{name:<34} {tok:>11} {t:>10.1f}ms {lo:>7.1f}ms {lo / t:>10.3f}x")
        finally:
            server.stop()
    print("burst train (run before and after the loop): each step's step_s; loop: the client's wall time from")
    print("forward_backward to optim_step's result")


if __name__ == "__main__":
    main()
