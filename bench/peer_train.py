#!/usr/bin/env python3
"""Plain PyTorch eager peer for Burst's training benchmark.

Trains the same model (tests/reference/llama_ref.py, loaded from an HF folder)
with the same recipe and thread count as the Burst run it is compared with:
  * --method lora: frozen base, LoRA on --targets (A kaiming-uniform(a=sqrt(5))
    like PEFT, B zeros, scale alpha/rank, no dropout)
  * --method full: every base weight is trained
  * torch.optim.AdamW(lr, betas (0.9, 0.999), eps 1e-8, weight_decay 0),
    constant learning rate, no gradient clipping
  * random token batches (B, T) drawn from the vocabulary with --seed,
    loss = mean next-token cross-entropy over all B*(T-1) predictions
  * --compile: the forward and the loss under torch.compile (Inductor's C++
    kernels on the CPU), as a user would speed up a training loop; the
    optimizer step stays eager
W warmup steps run untimed (with --compile, the compilation happens there),
then N timed steps. Prints one JSON line:
  {"impl": "pytorch-eager" or "pytorch-compiled", "method", "tokens_per_s" (B*T*N / timed seconds),
   "step_s" (mean timed step), "peak_rss_mb", "threads", "params",
   "trainable_params", ...}

Usage:
  /usr/bin/python3 bench/peer_train.py --model DIR --method lora --rank 8 --alpha 16 \
      --targets q,k,v,o,gate,up,down --batch-size 8 --seq-len 128 --steps 10 \
      --warmup 2 --threads 2 --lr 1e-4 --seed 0
"""

import argparse
import json
import os
import resource
import sys
import time

# The same OpenMP and OpenBLAS wait policies as Burst (src/model/cpu_threads.cpp); they must be
# set before torch loads libgomp and OpenBLAS.
os.environ.setdefault("OPENBLAS_THREAD_TIMEOUT", "4")  # as Burst: OpenBLAS threads sleep between GEMMs

import torch  # noqa: E402
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests",
                                "reference"))
import llama_ref  # noqa: E402
import peer_threads  # noqa: E402

SHORT = {"q": "self_attn.q_proj", "k": "self_attn.k_proj", "v": "self_attn.v_proj",
         "o": "self_attn.o_proj", "gate": "mlp.gate_proj", "up": "mlp.up_proj",
         "down": "mlp.down_proj"}


def parse_targets(s):
    out = []
    for t in s.split(","):
        t = t.strip()
        if not t:
            continue
        if t.endswith("_proj"):
            t = t[:-5]
        if t not in SHORT:
            raise SystemExit(f"unknown target {t!r}; use q,k,v,o,gate,up,down")
        out.append(SHORT[t])
    return out


def peak_rss_mb():
    # Linux reports ru_maxrss in KiB.
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def main(argv=None):
    ap = argparse.ArgumentParser(description="plain PyTorch eager training peer")
    ap.add_argument("--model", required=True)
    ap.add_argument("--method", choices=["lora", "full"], default="lora")
    ap.add_argument("--rank", type=int, default=8)
    ap.add_argument("--alpha", type=float, default=16)
    ap.add_argument("--targets", default="q,k,v,o,gate,up,down")
    ap.add_argument("--batch-size", type=int, default=8)
    ap.add_argument("--seq-len", type=int, default=128)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--lr", type=float, default=1e-4)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--compile", action="store_true", help="the forward and loss under torch.compile")
    ap.add_argument("--dtype", choices=["float32", "bfloat16"], default="float32",
                    help="parameter/compute dtype (norms and softmax stay float32)")
    a = ap.parse_args(argv)

    peer_threads.set_threads(a.threads)
    torch.manual_seed(a.seed)
    dtype = {"float32": torch.float32, "bfloat16": torch.bfloat16}[a.dtype]

    t_load = time.perf_counter()
    model = llama_ref.LlamaRef.from_folder(a.model, dtype)
    load_s = time.perf_counter() - t_load
    cfg = model.cfg

    if a.method == "lora":
        targets = parse_targets(a.targets)
        mods = [f"model.layers.{i}.{t}" for i in range(cfg.num_hidden_layers) for t in targets]
        params = list(model.add_lora(mods, a.rank, a.alpha).values())
    else:
        params = list(model.w.values())
    for p in params:
        p.requires_grad_(True)
    model.training = True
    opt = torch.optim.AdamW(params, lr=a.lr, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0)

    total_steps = a.warmup + a.steps
    g = torch.Generator().manual_seed(a.seed)
    batches = [torch.randint(0, cfg.vocab_size, (a.batch_size, a.seq_len), generator=g)
               for _ in range(total_steps)]

    def forward_loss(ids):
        logits = model(ids)
        return F.cross_entropy(logits[:, :-1].reshape(-1, cfg.vocab_size).float(), ids[:, 1:].reshape(-1))

    if a.compile:
        forward_loss = torch.compile(forward_loss)

    def step(ids):
        loss = forward_loss(ids)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        return loss.item()

    losses = []
    t_warm = time.perf_counter()
    for s in range(a.warmup):
        losses.append(step(batches[s]))
    warmup_s = time.perf_counter() - t_warm
    t0 = time.perf_counter()
    for s in range(a.warmup, total_steps):
        losses.append(step(batches[s]))
    elapsed = time.perf_counter() - t0

    tokens = a.batch_size * a.seq_len * a.steps
    res = {
        "impl": "pytorch-compiled" if a.compile else "pytorch-eager",
        "method": a.method,
        "tokens_per_s": tokens / elapsed if elapsed > 0 else None,
        "step_s": elapsed / a.steps if a.steps else None,
        "peak_rss_mb": round(peak_rss_mb(), 1),
        "threads": a.threads,
        "blas_threads": peer_threads.blas_threads(),
        "blas": peer_threads.blas_core(),
        "params": model.num_params(),
        "trainable_params": sum(p.numel() for p in params),
        "batch_size": a.batch_size,
        "seq_len": a.seq_len,
        "steps": a.steps,
        "warmup": a.warmup,
        "rank": a.rank if a.method == "lora" else None,
        "alpha": a.alpha if a.method == "lora" else None,
        "targets": a.targets if a.method == "lora" else None,
        "lr": a.lr,
        "seed": a.seed,
        "dtype": a.dtype,
        "first_loss": losses[0] if losses else None,
        "last_loss": losses[-1] if losses else None,
        "load_s": round(load_s, 3),
        "warmup_s": round(warmup_s, 3),
        "torch": torch.__version__,
    }
    print(json.dumps(res))
    return 0


if __name__ == "__main__":
    sys.exit(main())
