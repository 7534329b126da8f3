#!/usr/bin/env python3
"""transformers + PEFT as the peer of Burst's training and decoding
benchmarks, for the families transformers runs and Burst's own reference
model (llama_ref.py) does not (a mixture of experts): the model loaded with
AutoModelForCausalLM.from_pretrained in float32, eager attention, on the
same torch build and thread count as the Burst run it is compared with.

  train:  --method lora: PEFT LoRA on --targets (for a mixture of experts,
          gate/up/down adapt the experts, as PEFT converts them), rank,
          alpha, no dropout; --method full: every weight. AdamW (lr, betas
          (0.9, 0.999), eps 1e-8, weight decay 0), random token batches
          (B, T) from --seed, loss = mean next-token cross-entropy.
          W warmup steps untimed, then N timed steps.
  sample: greedy generate() with its KV cache: a random prompt of
          --prompt-len tokens, --new-tokens new ones, --batch-size rows;
          one untimed warmup generation first.

Prints one JSON line: {"impl": "transformers", "mode", "tokens_per_s",
"step_s" or "decode_tokens_per_s", "threads", "params", ...}.

Usage:
  .venv/bin/python bench/peer_hf.py train --model DIR --method lora --rank 8 --alpha 16 \\
      --batch-size 8 --seq-len 128 --steps 10 --warmup 2 --threads 2
  .venv/bin/python bench/peer_hf.py sample --model DIR --prompt-len 32 --new-tokens 64 \\
      --batch-size 1 --threads 2
"""

import argparse
import json
import os
import sys
import time

os.environ.setdefault("OPENBLAS_THREAD_TIMEOUT", "4")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import peer_threads  # noqa: E402

SHORT = {"q": "q_proj", "k": "k_proj", "v": "v_proj", "o": "o_proj", "gate": "gate_proj", "up": "up_proj",
         "down": "down_proj"}


def load(path):
    import transformers
    model = transformers.AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32,
                                                              attn_implementation="eager")
    return model


def train(a):
    model = load(a.model)
    if a.method == "lora":
        import peft
        targets = [SHORT.get(t.strip().removesuffix("_proj"), t.strip()) for t in a.targets.split(",") if t.strip()]
        model = peft.get_peft_model(model, peft.LoraConfig(r=a.rank, lora_alpha=a.alpha, target_modules=targets,
                                                           lora_dropout=0.0, bias="none"))
    else:
        for p in model.parameters():
            p.requires_grad_(True)
    model.train()
    params = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=a.lr, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0)
    vocab = model.config.vocab_size
    g = torch.Generator().manual_seed(a.seed)
    batches = [torch.randint(0, vocab, (a.batch_size, a.seq_len), generator=g) for _ in range(a.warmup + a.steps)]

    def step(ids):
        logits = model(input_ids=ids, use_cache=False).logits
        loss = F.cross_entropy(logits[:, :-1].reshape(-1, vocab).float(), ids[:, 1:].reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        return loss.item()

    losses = [step(b) for b in batches[:a.warmup]]
    t0 = time.perf_counter()
    losses += [step(b) for b in batches[a.warmup:]]
    elapsed = time.perf_counter() - t0
    return {"mode": "train", "method": a.method, "tokens_per_s": a.batch_size * a.seq_len * a.steps / elapsed,
            "step_s": elapsed / a.steps, "trainable_params": sum(p.numel() for p in params),
            "params": sum(p.numel() for p in model.parameters()), "batch_size": a.batch_size,
            "seq_len": a.seq_len, "steps": a.steps, "first_loss": losses[0], "last_loss": losses[-1]}


def sample(a):
    model = load(a.model).eval()
    g = torch.Generator().manual_seed(a.seed)
    prompt = torch.randint(0, model.config.vocab_size, (a.batch_size, a.prompt_len), generator=g)
    kw = {"do_sample": False, "use_cache": True, "pad_token_id": 0, "eos_token_id": None}
    with torch.no_grad():
        model.generate(prompt, max_new_tokens=4, min_new_tokens=4, **kw)  # warmup
        t0 = time.perf_counter()
        out = model.generate(prompt, max_new_tokens=a.new_tokens, min_new_tokens=a.new_tokens, **kw)
        elapsed = time.perf_counter() - t0
    new = out.shape[1] - a.prompt_len
    return {"mode": "sample", "tokens_per_s": a.batch_size * new / elapsed, "new_tokens": int(new),
            "prompt_len": a.prompt_len, "batch_size": a.batch_size,
            "params": sum(p.numel() for p in model.parameters())}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("mode", choices=["train", "sample"])
    ap.add_argument("--model", required=True)
    ap.add_argument("--method", choices=["lora", "full"], default="lora")
    ap.add_argument("--rank", type=int, default=8)
    ap.add_argument("--alpha", type=float, default=16)
    ap.add_argument("--targets", default="q,k,v,o,gate,up,down")
    ap.add_argument("--batch-size", type=int, default=8)
    ap.add_argument("--seq-len", type=int, default=128)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--prompt-len", type=int, default=32)
    ap.add_argument("--new-tokens", type=int, default=64)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--lr", type=float, default=1e-4)
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args(argv)
    peer_threads.set_threads(a.threads)
    torch.manual_seed(a.seed)
    import transformers
    res = train(a) if a.mode == "train" else sample(a)
    res.update({"impl": "transformers", "threads": a.threads, "blas_threads": peer_threads.blas_threads(),
                "torch": torch.__version__, "transformers": transformers.__version__})
    print(json.dumps(res))
    return 0


if __name__ == "__main__":
    sys.exit(main())
