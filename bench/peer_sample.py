#!/usr/bin/python3
"""Plain PyTorch eager peer for Burst's sampling benchmark.

Greedy decoding with a KV cache in the reference model
(tests/reference/llama_ref.py): a random prompt of --prompt-len tokens (from
--seed) is prefilled in one forward pass, then --new-tokens tokens are
generated one at a time (argmax), each step feeding one token through the
cache. One untimed warmup generation of a few tokens runs first.
Prints one JSON line:
  {"impl": "pytorch-eager",
   "sample_tokens_per_s": batch * new_tokens / (prefill_s + decode_s),
   "decode_tokens_per_s": batch * (new_tokens - 1) / decode_s
        (the first new token comes from the prefill logits),
   "prefill_s", "decode_s", "peak_rss_mb", "threads", "params", ...}

Usage:
  /usr/bin/python3 bench/peer_sample.py --model DIR --prompt-len 32 --new-tokens 64 --threads 2
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

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests",
                                "reference"))
import llama_ref  # noqa: E402
import peer_threads  # noqa: E402


def generate(model, prompt, new_tokens):
    """Greedy decode; returns (tokens (B, new_tokens), prefill_s, decode_s)."""
    cache = model.new_cache()
    out = []
    t0 = time.perf_counter()
    logits = model(prompt, cache)
    nxt = logits[:, -1].argmax(-1, keepdim=True)
    out.append(nxt)
    t1 = time.perf_counter()
    for _ in range(new_tokens - 1):
        logits = model(nxt, cache)
        nxt = logits[:, -1].argmax(-1, keepdim=True)
        out.append(nxt)
    t2 = time.perf_counter()
    return torch.cat(out, dim=1), t1 - t0, t2 - t1


def main(argv=None):
    ap = argparse.ArgumentParser(description="plain PyTorch eager sampling peer")
    ap.add_argument("--model", required=True)
    ap.add_argument("--prompt-len", type=int, default=32)
    ap.add_argument("--new-tokens", type=int, default=64)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--batch-size", type=int, default=1)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--dtype", choices=["float32", "bfloat16"], default="float32")
    ap.add_argument("--adapter", help="optional PEFT LoRA adapter folder (applied unmerged)")
    a = ap.parse_args(argv)
    if a.prompt_len < 1 or a.new_tokens < 1:
        ap.error("--prompt-len and --new-tokens must be >= 1")

    peer_threads.set_threads(a.threads)
    dtype = {"float32": torch.float32, "bfloat16": torch.bfloat16}[a.dtype]
    model = llama_ref.LlamaRef.from_folder(a.model, dtype)
    if a.adapter:
        model.load_adapter(a.adapter)
    g = torch.Generator().manual_seed(a.seed)
    prompt = torch.randint(0, model.cfg.vocab_size, (a.batch_size, a.prompt_len), generator=g)

    with torch.inference_mode():
        generate(model, prompt, min(4, a.new_tokens))  # warmup, untimed
        tokens, prefill_s, decode_s = generate(model, prompt, a.new_tokens)

    total = prefill_s + decode_s
    n = a.batch_size * a.new_tokens
    res = {
        "impl": "pytorch-eager",
        "sample_tokens_per_s": n / total if total > 0 else None,
        "decode_tokens_per_s": (a.batch_size * (a.new_tokens - 1) / decode_s
                                if a.new_tokens > 1 and decode_s > 0 else None),
        "prefill_s": prefill_s,
        "decode_s": decode_s,
        "prompt_len": a.prompt_len,
        "new_tokens": a.new_tokens,
        "batch_size": a.batch_size,
        "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0, 1),
        "threads": a.threads,
        "blas_threads": peer_threads.blas_threads(),
        "blas": peer_threads.blas_core(),
        "params": model.num_params(),
        "dtype": a.dtype,
        "seed": a.seed,
        "first_tokens": tokens[0, :8].tolist(),
        "torch": torch.__version__,
    }
    print(json.dumps(res))
    return 0


if __name__ == "__main__":
    sys.exit(main())
