#!/usr/bin/env python3
"""Hugging Face transformers + PEFT peer for Burst's GPU check.

scripts/gpu-check.sh runs this script next to Burst's engine (build/bench/
burst_bench) on the same GPU and records its one JSON line per stage:
  parity_hf        hf_peer.py parity --model DIR --burst DIR
                   Burst's CPU logits, loss and LoRA gradients (burst_bench
                   parity) against transformers' Llama and PEFT, in float32
                   on the CPU and on CUDA (TF32 off).
  train_hf_PRESET  hf_peer.py train --preset PRESET --batch-size B --seq-len T ...
                   LoRA training speed and peak memory, bf16 autocast.
  sample_hf_*      hf_peer.py sample --preset PRESET --prompt-len P --new-tokens N ...
                   greedy generate() with the KV cache.
The shapes (--preset) are Llama configs with random bf16 weights built on the
GPU: llama3.2-1b, llama3.1-8b and tiny (a quick self-test).

stdout gets exactly one JSON line ({"impl": "hf+peft", "method": ...}); any
failure prints {"impl": "hf+peft", "method": ..., "error": "Type: message"}
and exits 1. Progress and library warnings go to stderr. transformers and
peft are imported inside the subcommands, so --help works without them.
"""

import argparse
import contextlib
import json
import os
import re
import struct
import sys
import time

IMPL = "hf+peft"
TARGETS = {"q": "q_proj", "k": "k_proj", "v": "v_proj", "o": "o_proj",
           "gate": "gate_proj", "up": "up_proj", "down": "down_proj"}
LLAMA3_ROPE = {"rope_type": "llama3", "low_freq_factor": 1.0, "high_freq_factor": 4.0,
               "original_max_position_embeddings": 8192}
PRESETS = {
    "llama3.2-1b": dict(hidden_size=2048, intermediate_size=8192, num_hidden_layers=16,
                        num_attention_heads=32, num_key_value_heads=8, head_dim=64, vocab_size=128256,
                        rms_norm_eps=1e-5, max_position_embeddings=131072, tie_word_embeddings=True,
                        rope_theta=500000.0, rope=dict(LLAMA3_ROPE, factor=32.0)),
    "llama3.1-8b": dict(hidden_size=4096, intermediate_size=14336, num_hidden_layers=32,
                        num_attention_heads=32, num_key_value_heads=8, head_dim=128, vocab_size=128256,
                        rms_norm_eps=1e-5, max_position_embeddings=131072, tie_word_embeddings=False,
                        rope_theta=500000.0, rope=dict(LLAMA3_ROPE, factor=8.0)),
    "tiny": dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                 num_key_value_heads=2, head_dim=16, vocab_size=512, rms_norm_eps=1e-5,
                 max_position_embeddings=4096, tie_word_embeddings=False, rope_theta=10000.0, rope=None),
}


def log(msg):
    print("[hf_peer] " + msg, file=sys.stderr, flush=True)


def versions():
    import torch
    out = {"torch": torch.__version__}
    for name in ("transformers", "peft"):
        try:
            out[name] = __import__(name).__version__
        except Exception:  # noqa: BLE001 - a missing library is reported, not fatal here
            out[name] = None
    return out


def gpu_name():
    import torch
    return torch.cuda.get_device_name() if torch.cuda.is_available() else None


def version_at_least(v, major, minor):
    nums = [int(x) for x in re.findall(r"\d+", v)[:2]] + [0, 0]
    return (nums[0], nums[1]) >= (major, minor)


def dtype_kwargs(dtype):
    """transformers >= 4.56 (and 5.x) take dtype=; older releases torch_dtype=."""
    import transformers
    return {"dtype": dtype} if version_at_least(transformers.__version__, 4, 56) else {"torch_dtype": dtype}


def llama_config(preset):
    """The preset as a LlamaConfig: rope_parameters (transformers 5) or rope_theta + rope_scaling (4.x)."""
    import inspect
    from transformers import LlamaConfig
    spec = dict(PRESETS[preset])
    theta, rope = spec.pop("rope_theta"), spec.pop("rope")
    known = set(inspect.signature(LlamaConfig).parameters) | set(getattr(LlamaConfig, "__dataclass_fields__", {}))
    if "rope_parameters" in known:
        spec["rope_parameters"] = dict(rope or {"rope_type": "default"}, rope_theta=theta)
    else:
        spec["rope_theta"] = theta
        spec["rope_scaling"] = dict(rope) if rope else None
    spec.update(attention_bias=False, mlp_bias=False, attention_dropout=0.0, hidden_act="silu")
    return LlamaConfig(**spec)


def build_model(preset, attn, seed):
    """Random Llama in bf16, constructed directly on the GPU (no float32 copy, no disk)."""
    import torch
    from transformers import LlamaForCausalLM
    config = llama_config(preset)
    torch.manual_seed(seed)
    t0 = time.time()
    with torch.device("cuda"):
        try:
            model = LlamaForCausalLM._from_config(config, attn_implementation=attn, **dtype_kwargs(torch.bfloat16))
        except TypeError:
            # A release whose _from_config knows neither spelling: the default dtype does it.
            old = torch.get_default_dtype()
            torch.set_default_dtype(torch.bfloat16)
            try:
                config._attn_implementation = attn
                model = LlamaForCausalLM(config)
            finally:
                torch.set_default_dtype(old)
    if any(p.dtype != torch.bfloat16 for p in model.parameters()):
        model = model.to(torch.bfloat16)
    # Our own initialisation (normal(0, 0.02) like Hugging Face, norms at one), so
    # the weights are finite and the same whatever the library's init does.
    torch.manual_seed(seed)
    with torch.no_grad():
        for p in model.parameters():
            if p.dim() >= 2:
                p.normal_(0.0, 0.02)
            else:
                p.fill_(1.0)
    torch.cuda.synchronize()
    log("built %s (%s attention) in %.1fs" % (preset, attn, time.time() - t0))
    return model


def rope_summary(config):
    rope = getattr(config, "rope_parameters", None) or getattr(config, "rope_scaling", None)
    return json.loads(json.dumps(rope, default=str))


def optimizer_kind(opt, params):
    """Which AdamW implementation torch picks by default for these parameters."""
    try:
        from torch.optim.optimizer import _default_to_fused_or_foreach
        fused, foreach = _default_to_fused_or_foreach(list(params), False, False)
        impl = "fused" if fused else "foreach" if foreach else "for-loop"
    except Exception:  # noqa: BLE001 - private helper; the name is informative only
        impl = "default"
    return "torch.optim.AdamW(%s)" % impl


def cmd_train(a):
    import torch
    from peft import LoraConfig, get_peft_model
    if not torch.cuda.is_available():
        raise RuntimeError("train needs CUDA")
    names = [t.strip() for t in a.targets.split(",") if t.strip()]
    unknown = [t for t in names if t not in TARGETS]
    if unknown:
        raise ValueError("unknown --targets %s (known: %s)" % (unknown, ",".join(TARGETS)))
    torch.cuda.reset_peak_memory_stats()
    model = build_model(a.preset, a.attn, a.seed)
    model.config.use_cache = False
    vocab = model.config.vocab_size
    base_params = sum(p.numel() for p in model.parameters())
    alpha = int(a.alpha) if float(a.alpha).is_integer() else a.alpha
    lcfg = LoraConfig(r=a.rank, lora_alpha=alpha, lora_dropout=0.0, target_modules=[TARGETS[t] for t in names],
                      bias="none", task_type="CAUSAL_LM")
    torch.manual_seed(a.seed)
    model = get_peft_model(model, lcfg)
    model.train()
    trainable = [p for p in model.parameters() if p.requires_grad]
    lora_dtypes = sorted({str(p.dtype).replace("torch.", "") for n, p in model.named_parameters() if "lora_" in n})
    opt = torch.optim.AdamW(trainable, lr=a.lr, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0)
    batches = draw_batches(a.seed, a.warmup + a.steps, a.batch_size, a.seq_len, vocab)
    batches = [b.cuda() for b in batches]

    def step(ids):
        with torch.autocast("cuda", dtype=torch.bfloat16):
            out = model(input_ids=ids, labels=ids)
        out.loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        return out.loss.item()

    losses = []
    for s in range(a.warmup):
        losses.append(step(batches[s]))
        log("warmup step %d loss %.4f" % (s, losses[-1]))
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for s in range(a.warmup, a.warmup + a.steps):
        losses.append(step(batches[s]))
    torch.cuda.synchronize()
    elapsed = time.perf_counter() - t0
    log("%d timed steps in %.3fs" % (a.steps, elapsed))
    return dict(method="lora", preset=a.preset,
                tokens_per_s=a.batch_size * a.seq_len * a.steps / elapsed if a.steps else None,
                step_s=elapsed / a.steps if a.steps else None,
                peak_mem_allocated_mb=torch.cuda.max_memory_allocated() / 2**20,
                peak_mem_reserved_mb=torch.cuda.max_memory_reserved() / 2**20,
                params=base_params, trainable_params=sum(p.numel() for p in trainable),
                lora_dtype=",".join(lora_dtypes), batch_size=a.batch_size, seq_len=a.seq_len, steps=a.steps,
                warmup=a.warmup, rank=a.rank, alpha=alpha, targets=",".join(names), lr=a.lr, seed=a.seed,
                first_loss=losses[0] if losses else None, last_loss=losses[-1] if losses else None,
                attn=a.attn, optimizer=optimizer_kind(opt, trainable), rope=rope_summary(model.config),
                **versions(), gpu=gpu_name())


def draw_batches(seed, count, batch, seq, vocab):
    """Token batches drawn on the CPU from one seeded generator, as Burst draws them."""
    import torch
    g = torch.Generator().manual_seed(seed)
    return [torch.randint(0, vocab, (batch, seq), generator=g) for _ in range(count)]


def cmd_sample(a):
    import copy
    import torch
    if not torch.cuda.is_available():
        raise RuntimeError("sample needs CUDA")
    torch.cuda.reset_peak_memory_stats()
    model = build_model(a.preset, a.attn, a.seed)
    model.eval()
    model.config.use_cache = True
    # No end-of-sequence token: every row runs the full length (and
    # min_new_tokens guards it too).
    for cfg in (model.config, model.generation_config):
        with contextlib.suppress(Exception):
            cfg.eos_token_id = None
    ids = draw_batches(a.seed, 1, a.batch_size, a.prompt_len, model.config.vocab_size)[0].cuda()
    mask = torch.ones_like(ids)

    def gen_config(n):
        from transformers import GenerationConfig
        g = copy.deepcopy(model.generation_config) if model.generation_config is not None else GenerationConfig()
        g.update(max_new_tokens=n, min_new_tokens=n, do_sample=False, num_beams=1, use_cache=True,
                 pad_token_id=0, eos_token_id=None)
        return g

    with torch.inference_mode():
        model.generate(input_ids=ids, attention_mask=mask, generation_config=gen_config(4))
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        out = model.generate(input_ids=ids, attention_mask=mask, generation_config=gen_config(a.new_tokens))
        torch.cuda.synchronize()
        elapsed = time.perf_counter() - t0
    out = getattr(out, "sequences", out)
    new = out.shape[1] - a.prompt_len
    if new != a.new_tokens:
        raise RuntimeError("generate() produced %d new tokens, not %d" % (new, a.new_tokens))
    return dict(method="sample", preset=a.preset, tokens_per_s=a.batch_size * a.new_tokens / elapsed,
                elapsed_s=elapsed, prompt_len=a.prompt_len, new_tokens=a.new_tokens, batch_size=a.batch_size,
                peak_mem_allocated_mb=torch.cuda.max_memory_allocated() / 2**20,
                first_tokens=out[0, a.prompt_len:a.prompt_len + 8].tolist(), attn=a.attn, seed=a.seed,
                **versions(), gpu=gpu_name())


# ---- safetensors without the safetensors package (the format is small)
_ST_DTYPES = {"F64": "float64", "F32": "float32", "F16": "float16", "BF16": "bfloat16", "I64": "int64",
              "I32": "int32", "I16": "int16", "I8": "int8", "U8": "uint8", "BOOL": "bool"}


def read_safetensors(path, prefer_package=True):
    """name -> CPU tensor: 8-byte little-endian header length, JSON header, raw little-endian data."""
    import torch
    if prefer_package:
        try:
            from safetensors.torch import load_file
            return load_file(path)
        except ImportError:
            pass
    with open(path, "rb") as f:
        blob = f.read()
    (n,) = struct.unpack("<Q", blob[:8])
    header = json.loads(blob[8:8 + n].decode("utf-8"))
    data = memoryview(blob)[8 + n:]
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        if info["dtype"] not in _ST_DTYPES:
            raise ValueError("%s: dtype %s not supported" % (name, info["dtype"]))
        dtype = getattr(torch, _ST_DTYPES[info["dtype"]])
        begin, end = info["data_offsets"]
        shape = list(info["shape"])
        if end == begin:
            out[name] = torch.empty(shape, dtype=dtype)
        else:
            out[name] = torch.frombuffer(bytearray(data[begin:end]), dtype=dtype).reshape(shape).clone()
    return out


def peft_name(name):
    """PEFT's parameter name without the adapter name: ...lora_A.default.weight -> ...lora_A.weight."""
    return re.sub(r"\.(lora_[A-Za-z_]+)\.default(?=\.)", r".\1", name)


def max_abs(t):
    return float(t.abs().max()) if t.numel() else 0.0


def parity_on(device, a, burst, adapter_file):
    import torch
    from peft import PeftModel
    from transformers import LlamaForCausalLM
    if device == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
    model = LlamaForCausalLM.from_pretrained(a.model, attn_implementation="eager", **dtype_kwargs(torch.float32))
    model = model.to(device=device, dtype=torch.float32).eval()
    model.config.use_cache = False
    ids = burst["ids"].long().to(device)
    ref_logits = burst["logits"].float()
    with torch.no_grad():
        logits = model(input_ids=ids).logits.float().cpu()
    if logits.shape != ref_logits.shape:
        raise ValueError("logits shape %s, Burst's %s" % (tuple(logits.shape), tuple(ref_logits.shape)))
    logit_diff = max_abs(logits - ref_logits)
    model = PeftModel.from_pretrained(model, os.path.join(a.burst, "adapter"), is_trainable=True)
    model = model.to(device).eval()
    lora = {peft_name(n): p for n, p in model.named_parameters() if "lora_" in n}
    # PEFT must have loaded exactly what Burst wrote.
    saved = read_safetensors(adapter_file)
    missing = sorted(set(saved) - set(lora))
    if missing:
        raise ValueError("adapter tensors PEFT did not load: %s" % missing[:20])
    adapter_diff = max((max_abs(lora[k].detach().float().cpu() - v.float()) for k, v in saved.items()), default=0.0)
    loss = model(input_ids=ids, labels=ids).loss
    loss.backward()
    ref_grads = {k[len("grad."):]: v for k, v in burst.items() if k.startswith("grad.")}
    missing = sorted(set(ref_grads) - set(lora))
    extra = sorted(set(lora) - set(ref_grads))
    if missing or extra:
        raise ValueError("LoRA names differ: Burst only %s; PEFT only %s" % (missing[:20], extra[:20]))
    grad_abs, grad_rel = 0.0, 0.0
    for name, ref in ref_grads.items():
        g = lora[name].grad
        if g is None:
            raise RuntimeError("no gradient reached " + name)
        d = max_abs(g.float().cpu() - ref.float())
        grad_abs = max(grad_abs, d)
        grad_rel = max(grad_rel, d / max(max_abs(ref), 1e-30))
    loss_hf, loss_burst = float(loss.detach()), float(burst["loss"].reshape(-1)[0])
    return {"logits_max_abs": logit_diff, "logits_max_rel": logit_diff / max(max_abs(ref_logits), 1e-30),
            "loss_hf": loss_hf, "loss_burst": loss_burst, "loss_abs_diff": abs(loss_hf - loss_burst),
            "grad_max_abs": grad_abs, "grad_max_rel": grad_rel, "grads_compared": len(ref_grads),
            "adapter_tensors_checked": len(saved), "adapter_max_abs": adapter_diff,
            "adapter_loaded_exact": adapter_diff == 0.0}


def cmd_parity(a):
    import torch
    torch.manual_seed(0)
    burst = read_safetensors(os.path.join(a.burst, "cpu.safetensors"))
    for key in ("ids", "logits", "loss"):
        if key not in burst:
            raise ValueError("%s has no tensor %r" % (os.path.join(a.burst, "cpu.safetensors"), key))
    adapter_file = os.path.join(a.burst, "adapter", "adapter_model.safetensors")
    res = {"method": "parity", "model": a.model, "burst": a.burst}
    failures = []
    for device in [d.strip() for d in a.devices.split(",") if d.strip()]:
        if device == "cuda" and not torch.cuda.is_available():
            log("cuda: not available, skipped")
            res[device] = {"skipped": "CUDA not available"}
            continue
        log("parity on " + device)
        try:
            res[device] = parity_on(device, a, burst, adapter_file)
        except Exception as e:  # noqa: BLE001 - one device failing keeps the other's result
            import traceback
            traceback.print_exc(file=sys.stderr)
            failures.append(e)
            res[device] = {"error": "%s: %s" % (type(e).__name__, e)}
        log("%s: %s" % (device, json.dumps(res[device])))
    if failures and all("error" in v or "skipped" in v for k, v in res.items() if isinstance(v, dict)):
        raise failures[0]
    res.update(versions())
    res["gpu"] = gpu_name()
    return res


def cmd_selftest_reader(a):
    tensors = read_safetensors(a.file, prefer_package=False)
    return {"method": "selftest-reader",
            "tensors": {k: {"dtype": str(v.dtype).replace("torch.", ""), "shape": list(v.shape),
                            "sum": float(v.double().sum())} for k, v in tensors.items()}}


class Parser(argparse.ArgumentParser):
    """A usage error is a failure like any other: one JSON error line on stdout."""

    def error(self, message):
        self.print_usage(sys.stderr)
        cmd = next((x for x in sys.argv[1:2] if x in ("train", "sample", "parity", "selftest-reader")), None)
        print(json.dumps({"impl": IMPL, "method": "lora" if cmd == "train" else cmd,
                          "error": "ArgumentError: " + message}), flush=True)
        sys.exit(1)


def parse_args(argv):
    p = Parser(description="Hugging Face transformers + PEFT peer for Burst's GPU check "
                                            "(one JSON line on stdout).")
    sub = p.add_subparsers(dest="cmd", metavar="{train,sample,parity}", required=True)
    attn = dict(choices=["sdpa", "eager"], default="sdpa", help="attn_implementation (default sdpa)")
    preset = dict(choices=sorted(PRESETS), required=True, help="model shape (random bf16 weights)")

    t = sub.add_parser("train", help="LoRA training speed and peak memory (bf16 autocast)")
    t.add_argument("--preset", **preset)
    t.add_argument("--batch-size", type=int, default=8)
    t.add_argument("--seq-len", type=int, default=2048)
    t.add_argument("--steps", type=int, default=5, help="timed steps")
    t.add_argument("--warmup", type=int, default=2, help="untimed steps first")
    t.add_argument("--rank", type=int, default=8)
    t.add_argument("--alpha", type=float, default=16)
    t.add_argument("--targets", default="q,k,v,o,gate,up,down", help="comma list of q,k,v,o,gate,up,down")
    t.add_argument("--lr", type=float, default=1e-4)
    t.add_argument("--seed", type=int, default=0)
    t.add_argument("--attn", **attn)

    s = sub.add_parser("sample", help="greedy generate() speed with the KV cache")
    s.add_argument("--preset", **preset)
    s.add_argument("--prompt-len", type=int, default=128)
    s.add_argument("--new-tokens", type=int, default=128)
    s.add_argument("--batch-size", type=int, default=1)
    s.add_argument("--seed", type=int, default=0)
    s.add_argument("--attn", **attn)

    q = sub.add_parser("parity", help="Burst's logits, loss and LoRA grads against transformers + PEFT")
    q.add_argument("--model", required=True, help="Hugging Face Llama folder written by Burst")
    q.add_argument("--burst", required=True, help="burst_bench parity output (cpu.safetensors, adapter/)")
    q.add_argument("--devices", default="cpu,cuda", help="comma list (cuda is skipped when absent)")

    r = sub.add_parser("selftest-reader")  # hidden: the built-in safetensors reader on FILE
    r.add_argument("file")
    return p.parse_args(argv)


def main(argv=None):
    a = parse_args(sys.argv[1:] if argv is None else argv)
    cmds = {"train": cmd_train, "sample": cmd_sample, "parity": cmd_parity, "selftest-reader": cmd_selftest_reader}
    method = "lora" if a.cmd == "train" else a.cmd
    try:
        # Anything a library prints goes to stderr: stdout carries only the result.
        with contextlib.redirect_stdout(sys.stderr):
            res = cmds[a.cmd](a)
    except BaseException as e:  # noqa: BLE001 - every failure becomes the error line
        if isinstance(e, SystemExit) and e.code in (0, None):
            raise
        import traceback
        traceback.print_exc(file=sys.stderr)
        print(json.dumps({"impl": IMPL, "method": method, "error": "%s: %s" % (type(e).__name__, e)}), flush=True)
        return 1
    print(json.dumps(dict({"impl": IMPL}, **res)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
