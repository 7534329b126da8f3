#!/usr/bin/env python3
"""TRL's SFTTrainer + PEFT: the peer a user would pick instead of Burst
(bench/train_real.py, docs/bench.md "Training on real data").

The same model folder (transformers' from_pretrained, SDPA attention), the
same examples in the same order and steps (the token ids and loss masks of
`burst_bench batches`, given to SFTTrainer pre-tokenized as input_ids +
completion_mask), the recipe's LoRA (PEFT LoraConfig on its targets), its
optimizer settings, schedule and gradient clipping, and the thread count.
Batches are padding-free (SFTConfig padding_free=True: each step's
examples flattened into one row, position_ids restarting at each example;
transformers builds the block-diagonal causal mask from them), which TRL's
docs recommend for speed; the loss is on the completion tokens only.
Gradient checkpointing, on by default in TRL to save memory, is off: it
recomputes the forward in the backward, and this peer is the fast setting.
Trainer's own loop times the steps: tokens/s = real tokens of the steps
after --warmup / the time between their ends (collation, forward, backward,
clipping, optimizer, callbacks: what a user waits for). Prints one JSON line:
  {"impl": "trl-sft", "tokens_per_s", "steps", "warmup", "train_s",
   "wall_s", "peak_rss_mb", "threads", "trl", "transformers", "torch", ...}

Usage:
  .venv/bin/python bench/peer_sft.py --recipe RECIPE.json --model DIR \
      --batches BATCHES.jsonl --threads 2 [--warmup 3]
"""

import argparse
import json
import os
import resource
import shutil
import sys
import tempfile
import time

T_START = time.perf_counter()
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
os.environ.setdefault("HF_DATASETS_DISABLE_PROGRESS_BARS", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import torch  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import peer_threads  # noqa: E402

SHORT = {"q": "q_proj", "k": "k_proj", "v": "v_proj", "o": "o_proj", "gate": "gate_proj", "up": "up_proj",
         "down": "down_proj"}


def load_steps(path):
    """[[(ids, weights), ...] per step] from `burst_bench batches`."""
    steps = {}
    with open(path) as f:
        for line in f:
            mb = json.loads(line)
            for ids, w in zip(mb["ids"], mb["weights"]):
                steps.setdefault(mb["step"], []).append((ids, w))
    return [steps[s] for s in sorted(steps)]


def main(argv=None):
    ap = argparse.ArgumentParser(description="TRL SFTTrainer + PEFT peer on Burst's batches")
    ap.add_argument("--recipe", required=True)
    ap.add_argument("--model", required=True, help="the HF folder Burst trains")
    ap.add_argument("--batches", required=True, help="burst_bench batches output")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--warmup", type=int, default=3, help="steps left out of the timing")
    a = ap.parse_args(argv)

    import datasets
    import peft
    import transformers
    import trl

    r = json.load(open(a.recipe))
    if r.get("method", "lora") != "lora":
        raise SystemExit("peer_sft: only LoRA recipes")
    peer_threads.set_threads(a.threads)
    steps = load_steps(a.batches)
    per_step = len(steps[0])
    if any(len(s) != per_step for s in steps[:-1]):
        raise SystemExit("peer_sft: the steps have different example counts; SFTTrainer's batches would not match")
    examples = [(ids, w) for s in steps for ids, w in s]
    data = datasets.Dataset.from_dict({
        "input_ids": [ids for ids, _ in examples],
        "completion_mask": [[1 if x != 0 else 0 for x in w] for _, w in examples],
    })

    tokenizer = transformers.AutoTokenizer.from_pretrained(a.model)
    model = transformers.AutoModelForCausalLM.from_pretrained(a.model, dtype=torch.float32,
                                                              attn_implementation="sdpa")
    lo = r.get("lora", {})
    lora = peft.LoraConfig(r=lo.get("rank", 8), lora_alpha=lo.get("alpha", 16), lora_dropout=lo.get("dropout", 0.0),
                           target_modules=[SHORT[t.removesuffix("_proj")] for t in lo.get("targets", ["q", "v"])],
                           bias="none", task_type="CAUSAL_LM")
    o = r.get("optimizer", {})
    sched = r.get("schedule", {})
    betas = o.get("betas", (0.9, 0.999))
    out_dir = tempfile.mkdtemp(prefix="peer-sft-")  # Trainer wants one; nothing is saved there
    cfg = trl.SFTConfig(
        output_dir=out_dir,
        per_device_train_batch_size=per_step, gradient_accumulation_steps=1, max_steps=len(steps),
        learning_rate=r.get("learning_rate", 1e-4), lr_scheduler_type=sched.get("kind", "constant"),
        warmup_steps=sched.get("warmup_steps", 0), adam_beta1=betas[0], adam_beta2=betas[1],
        adam_epsilon=o.get("eps", 1e-8), weight_decay=o.get("weight_decay", 0.0),
        max_grad_norm=r.get("grad_clip", 1.0), seed=r.get("seed", 0), use_cpu=True, bf16=False, fp16=False,
        padding_free=True, packing=False, completion_only_loss=True, max_length=None, gradient_checkpointing=False,
        dataloader_num_workers=0, dataloader_pin_memory=False, save_strategy="no", eval_strategy="no",
        logging_strategy="no", report_to="none", disable_tqdm=True)

    ends = []
    tokens = []

    class Timer(transformers.TrainerCallback):
        def on_step_end(self, args, state, control, **kw):
            ends.append(time.perf_counter())

    class InOrder(trl.SFTTrainer):
        # Burst's order, so that every step trains the very examples Burst's does.
        def _get_train_sampler(self, *args, **kwargs):
            return torch.utils.data.SequentialSampler(self.train_dataset)

    trainer = InOrder(model=model, args=cfg, train_dataset=data, processing_class=tokenizer, peft_config=lora,
                      callbacks=[Timer()])
    collate = trainer.data_collator

    def counting(batch):
        out = collate(batch)
        tokens.append(sum(len(x["input_ids"]) for x in batch))
        if out["input_ids"].shape[0] != 1:
            raise SystemExit("peer_sft: the batch is not padding-free")
        return out

    trainer.data_collator = counting
    t_train = time.perf_counter()
    trainer.train()
    train_s = time.perf_counter() - t_train
    shutil.rmtree(out_dir, ignore_errors=True)
    if len(ends) != len(steps) or len(tokens) != len(steps):
        raise SystemExit(f"peer_sft: {len(ends)} steps ended, {len(tokens)} batches, {len(steps)} expected")
    w = min(a.warmup, len(steps) - 1)
    timed_s = ends[-1] - ends[w - 1] if w > 0 else ends[-1] - t_train
    timed_tokens = sum(tokens[w:])
    want = sum(len(ids) for s in steps[w:] for ids, _ in s)
    if timed_tokens != want:
        raise SystemExit(f"peer_sft: trained {timed_tokens} tokens in the timed steps, Burst's batches have {want}")
    res = {
        "impl": "trl-sft",
        "tokens_per_s": timed_tokens / timed_s if timed_s > 0 else None,
        "steps": len(steps),
        "warmup": w,
        "tokens": sum(tokens),
        "train_s": round(train_s, 3),
        "wall_s": round(time.perf_counter() - T_START, 3),
        "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0, 1),
        "threads": a.threads,
        "attention": model.config._attn_implementation,
        "trainable_params": sum(p.numel() for p in trainer.model.parameters() if p.requires_grad),
        "trl": trl.__version__,
        "peft": peft.__version__,
        "transformers": transformers.__version__,
        "torch": torch.__version__,
    }
    print(json.dumps(res))
    return 0


if __name__ == "__main__":
    sys.exit(main())
