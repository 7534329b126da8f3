#!/usr/bin/python3
"""Padding peer for the real-data training benchmark (bench/train_real.sh).

What Hugging Face's Trainer + PEFT do with a chat dataset on the CPU, written
as a plain PyTorch eager loop on the same model (tests/reference/llama_ref.py,
loaded from the same HF folder Burst trains):
  * each micro-batch padded to its longest example (DataCollatorForSeq2Seq's
    dynamic padding), labels -100 on the prompt and the padding;
  * the LM head over every position, cross-entropy averaged over the step's
    label tokens (as Trainer does with num_items_in_batch);
  * LoRA on the recipe's targets (A kaiming-uniform like PEFT, B zeros,
    scale alpha/rank, the recipe's dropout), or every weight (full);
  * torch.optim.AdamW with the recipe's betas, eps and weight decay, gradient
    clipping at the recipe's grad_clip (Trainer's max_grad_norm), and the
    recipe's schedule (linear warm-up, then cosine / linear / constant).
The batches come from `burst_bench batches` (the very token ids, loss
weights, micro-batches and order Burst trains on). The first --warmup steps
run untimed. What else a run of the recipe does, when asked: --eval FILE
(`burst_bench batches --eval-out`) evaluates as Burst's trainer does, before
training, every eval_every steps and at the end (bench/peer_eval.py), and
--checkpoints DIR saves the trainable weights and the optimizer's state
every checkpoint_every steps and at the end, keeping the last keep_last
(torch.save, as Trainer's checkpoints). Prints one JSON line:
  {"impl": "pytorch-padded", "tokens_per_s" (real tokens of the timed steps
   per second), "padded_tokens_per_s", "pad_fraction", "train_s" (every
   step), "wall_s" (the process, model load included), "peak_rss_mb", ...}

Usage:
  /usr/bin/python3 bench/peer_padded.py --recipe RECIPE.json --model DIR \
      --batches BATCHES.jsonl --threads 2 [--warmup 3] [--eval EVAL.jsonl] [--checkpoints DIR]
"""

import argparse
import json
import math
import os
import resource
import sys
import time

T_START = time.perf_counter()
# The same OpenMP and OpenBLAS wait policies as Burst (src/model/cpu_threads.cpp); they must be
# set before torch loads libgomp and OpenBLAS.
os.environ.setdefault("OPENBLAS_THREAD_TIMEOUT", "4")  # as Burst: OpenBLAS threads sleep between GEMMs

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "reference"))
import llama_ref  # noqa: E402
import peer_eval  # noqa: E402
import peer_threads  # noqa: E402

SHORT = {"q": "self_attn.q_proj", "k": "self_attn.k_proj", "v": "self_attn.v_proj",
         "o": "self_attn.o_proj", "gate": "mlp.gate_proj", "up": "mlp.up_proj",
         "down": "mlp.down_proj"}


def scheduled_lr(kind, lr, step, warmup, total):
    """src/train/optimizer.cpp's ScheduledLr (step is 1-based)."""
    if warmup > 0 and step <= warmup:
        return lr * step / warmup
    if kind == "constant":
        return lr
    span = max(1, total - warmup)
    frac = min(1.0, max(0.0, (step - 1 - warmup) / span))
    if kind == "linear":
        return lr * (1.0 - frac)
    return lr * 0.5 * (1.0 + math.cos(math.pi * frac))


def load_batches(path):
    steps = {}
    with open(path) as f:
        for line in f:
            mb = json.loads(line)
            steps.setdefault(mb["step"], []).append((mb["ids"], mb["weights"]))
    return [steps[s] for s in sorted(steps)]


def collate(ids, weights):
    """Pad to the longest (right padding, id 0); labels -100 where no loss."""
    longest = max(len(x) for x in ids)
    inp = torch.zeros(len(ids), longest, dtype=torch.long)
    labels = torch.full((len(ids), longest), -100, dtype=torch.long)
    for i, (x, w) in enumerate(zip(ids, weights)):
        inp[i, :len(x)] = torch.tensor(x)
        lab = torch.tensor(x)
        lab[torch.tensor(w) == 0] = -100
        labels[i, :len(x)] = lab
    real = sum(len(x) for x in ids)
    return inp, labels, real, inp.numel()


def main(argv=None):
    ap = argparse.ArgumentParser(description="padding (HF Trainer-like) PyTorch peer on real batches")
    ap.add_argument("--recipe", required=True)
    ap.add_argument("--model", required=True, help="the HF folder Burst trains")
    ap.add_argument("--batches", required=True, help="burst_bench batches output")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--warmup", type=int, default=3, help="untimed steps first")
    ap.add_argument("--eval", help="held-out examples (burst_bench batches --eval-out): evaluate as Burst does")
    ap.add_argument("--checkpoints", help="a folder: save checkpoints as the recipe asks")
    a = ap.parse_args(argv)

    r = json.load(open(a.recipe))
    peer_threads.set_threads(a.threads)
    torch.manual_seed(r.get("seed", 0))
    model = llama_ref.LlamaRef.from_folder(a.model)
    cfg = model.cfg
    method = r.get("method", "lora")
    if method == "lora":
        lo = r.get("lora", {})
        targets = [SHORT[t.removesuffix("_proj")] for t in lo.get("targets", ["q", "v"])]
        mods = [f"model.layers.{i}.{t}" for i in range(cfg.num_hidden_layers) for t in targets]
        params = list(model.add_lora(mods, lo.get("rank", 8), lo.get("alpha", 16),
                                     dropout=lo.get("dropout", 0.0)).values())
    else:
        params = list(model.w.values())
    for p in params:
        p.requires_grad_(True)
    model.training = True
    o = r.get("optimizer", {})
    opt = torch.optim.AdamW(params, lr=r.get("learning_rate", 1e-4), betas=tuple(o.get("betas", (0.9, 0.999))),
                            eps=o.get("eps", 1e-8), weight_decay=o.get("weight_decay", 0.0))
    sched = r.get("schedule", {})
    kind, warm = sched.get("kind", "constant"), sched.get("warmup_steps", 0)
    clip = r.get("grad_clip", 1.0)

    steps = load_batches(a.batches)
    total = len(steps)
    evals = {}
    eval_s = checkpoint_s = 0.0
    if a.eval:
        stop_ids, held_out = peer_eval.load_examples(a.eval)

    def run_eval(step):
        nonlocal eval_s
        t = time.perf_counter()
        model.training = False
        evals[step] = peer_eval.evaluate(model, stop_ids, held_out, r.get("batch_size", 8))
        model.training = True
        eval_s += time.perf_counter() - t

    saved = []

    def save(step):
        nonlocal checkpoint_s
        t = time.perf_counter()
        path = os.path.join(a.checkpoints, f"step-{step:08d}.pt")
        torch.save({"step": step, "params": [p.detach() for p in params], "optimizer": opt.state_dict()}, path)
        saved.append(path)
        while len(saved) > max(1, r.get("keep_last", 2)):
            os.remove(saved.pop(0))
        checkpoint_s += time.perf_counter() - t

    if a.eval:
        run_eval(0)
    losses = []
    timed_s, timed_real, timed_padded, all_real, all_padded = 0.0, 0, 0, 0, 0
    step_s = 0.0
    for s, micro in enumerate(steps, start=1):
        t0 = time.perf_counter()
        batches = [collate(ids, w) for ids, w in micro]
        n_items = sum(int((lab[:, 1:] != -100).sum()) for _, lab, _, _ in batches)
        step_loss = 0.0
        for inp, lab, _, _ in batches:
            logits = model(inp)
            loss = F.cross_entropy(logits[:, :-1].reshape(-1, cfg.vocab_size).float(), lab[:, 1:].reshape(-1),
                                   ignore_index=-100, reduction="sum") / n_items
            loss.backward()
            step_loss += loss.item()
        if clip and clip > 0:
            torch.nn.utils.clip_grad_norm_(params, clip)
        for group in opt.param_groups:
            group["lr"] = scheduled_lr(kind, r.get("learning_rate", 1e-4), s, warm, total)
        opt.step()
        opt.zero_grad(set_to_none=True)
        losses.append(step_loss)
        dt = time.perf_counter() - t0
        step_s += dt
        real = sum(b[2] for b in batches)
        padded = sum(b[3] for b in batches)
        all_real += real
        all_padded += padded
        if s > a.warmup:
            timed_s += dt
            timed_real += real
            timed_padded += padded
        every = r.get("checkpoint_every", 0)
        if a.checkpoints and (s == total or (every > 0 and s % every == 0)):
            save(s)
        if a.eval and (s == total or (r.get("eval_every", 0) > 0 and s % r["eval_every"] == 0)):
            run_eval(s)
    train_s = step_s

    res = {
        "impl": "pytorch-padded",
        "method": method,
        "tokens_per_s": timed_real / timed_s if timed_s > 0 else None,
        "padded_tokens_per_s": timed_padded / timed_s if timed_s > 0 else None,
        "pad_fraction": 1.0 - all_real / all_padded if all_padded else None,
        "steps": total,
        "warmup": a.warmup,
        "tokens": all_real,
        "train_s": round(train_s, 3),
        "eval_s": round(eval_s, 3),
        "checkpoint_s": round(checkpoint_s, 3),
        "base_eval": evals.get(0),
        "final_eval": evals.get(total) if total else None,
        "wall_s": round(time.perf_counter() - T_START, 3),
        "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0, 1),
        "threads": a.threads,
        "blas_threads": peer_threads.blas_threads(),
        "blas": peer_threads.blas_core(),
        "first_loss": losses[0] if losses else None,
        "last_loss": losses[-1] if losses else None,
        "torch": torch.__version__,
    }
    print(json.dumps(res))
    return 0


if __name__ == "__main__":
    sys.exit(main())
