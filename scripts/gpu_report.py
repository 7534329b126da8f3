#!/usr/bin/env python3
"""The GPU check's report (scripts/gpu-check.sh): OUT_DIR/facts.json and
OUT_DIR/results.jsonl in, markdown out: the machine, each stage's outcome,
parity against the bounds, training and sampling speed against the Hugging
Face + PEFT peer (ratios, peak memory, MFU against the bf16 matrix rate
measured in the same run) and the GPU goals (docs/bench.md), met or not.

    python3 scripts/gpu_report.py OUT_DIR > OUT_DIR/report.md
"""
import json
import os
import sys


def load(out):
    with open(os.path.join(out, "facts.json")) as f:
        facts = json.load(f)
    stages = {}
    with open(os.path.join(out, "results.jsonl")) as f:
        for line in f:
            line = line.strip()
            if line:
                d = json.loads(line)
                stages[d["stage"]] = d
    return facts, stages


def fmt(x, digits=3):
    if x is None:
        return "-"
    if isinstance(x, float):
        if x != 0 and (abs(x) < 1e-3 or abs(x) >= 1e6):
            return "%.2e" % x
        return ("%." + str(digits) + "g") % x
    return str(x)


def outcome(d):
    if d is None:
        return "not run"
    if "skipped" in d:
        return "skipped: " + d["skipped"]
    if "error" in d:
        return "FAILED: " + d["error"].strip().replace("\n", " ")[:300]
    return "ok"


def main():
    out = sys.argv[1]
    facts, st = load(out)
    p = print
    p("# Burst GPU check")
    p()
    p("Machine: %s; %s CPUs; torch %s (CUDA %s); nvcc %s; Python %s; transformers %s; peft %s; %s." % (
        facts.get("gpu"), facts.get("cpus"), facts.get("torch"), facts.get("torch_cuda"), facts.get("nvcc"),
        facts.get("python"), facts.get("transformers"), facts.get("peft"), facts.get("date")))
    p()
    lat = facts.get("op_latency_us")
    if isinstance(lat, dict):
        p("Issuing one tiny GPU op costs %s us back to back, %s us inside a replayed CUDA graph: "
          "a decoding step of a few hundred kernels pays that many times over." % (lat.get("eager"), lat.get("graph")))
        p()
    if facts.get("differs"):
        p("Differs from the machine planned for:")
        for d in facts["differs"]:
            p("- " + d)
        p()
    p("## Stages")
    p()
    p("| stage | outcome |")
    p("| --- | --- |")
    for name, d in st.items():
        p("| %s | %s |" % (name, outcome(d).replace("|", "/")))
    p()

    gemm = st.get("gemm", {})
    peak = gemm.get("gflops")  # GFLOP/s of the best product
    if peak:
        p("Matrix rate measured in this run (%s %s, %d^3, best of %s): %.4g TFLOP/s." % (
            gemm.get("device"), gemm.get("dtype"), gemm.get("size", 0), gemm.get("repeats"), peak / 1e3))
        p()

    par = st.get("parity")
    if par and "error" not in par and "skipped" not in par:
        p("## Parity (tiny random model, batch %s x %s, LoRA rank %s with B nonzero)" % (
            par.get("batch_size"), par.get("seq_len"), par.get("rank")))
        p()
        p("Largest difference from the CPU (float32), over the CPU's largest magnitude:")
        p()
        p("| variant | logits | loss | LoRA grads | bounds (logits/loss/grads) | within |")
        p("| --- | --- | --- | --- | --- | --- |")
        for v in ("cuda_fp32", "cuda_bf16"):
            d = par.get(v, {})
            b = d.get("bounds", {})
            p("| %s | %s | %s | %s | %s / %s / %s | %s |" % (
                v, fmt(d.get("logits_rel")), fmt(d.get("loss_rel")), fmt(d.get("grad_rel")),
                fmt(b.get("logits_rel")), fmt(b.get("loss_rel")), fmt(b.get("grad_rel")), d.get("within_bounds")))
        p()
    hf = st.get("parity_hf")
    if hf and "error" not in hf and "skipped" not in hf:
        p("Burst (CPU, float32) against transformers' Llama and PEFT on the same weights and adapter:")
        p()
        p("| device | logits max abs | logits rel | loss HF | loss Burst | grad max abs | grad rel | grads |")
        p("| --- | --- | --- | --- | --- | --- | --- | --- |")
        for dev in ("cpu", "cuda"):
            d = hf.get(dev)
            if isinstance(d, dict):
                p("| %s | %s | %s | %s | %s | %s | %s | %s |" % (
                    dev, fmt(d.get("logits_max_abs")), fmt(d.get("logits_max_rel")), fmt(d.get("loss_hf"), 7),
                    fmt(d.get("loss_burst"), 7), fmt(d.get("grad_max_abs")), fmt(d.get("grad_max_rel")),
                    d.get("grads_compared")))
        p()

    rows = []
    for name, d in st.items():
        if name.startswith("train_burst_"):
            preset = name[len("train_burst_"):]
            rows.append((preset, d, st.get("train_hf_" + preset)))
    if rows:
        p("## LoRA training (%s, rank 16, all seven projections)" % (rows[0][1] or {}).get("precision", "float32"))
        p()
        p("| shape | batch x len | Burst tok/s | HF+PEFT tok/s | ratio | Burst peak GiB | HF peak GiB | "
          "Burst MFU | HF MFU |")
        p("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
        for preset, b, h in rows:
            bt = b.get("tokens_per_s") if b else None
            ht = h.get("tokens_per_s") if h else None
            ratio = bt / ht if bt and ht else None
            # FLOPs per token as Burst counts them (gflops_incl_attn / tokens_per_s), for both.
            flop_tok = b.get("gflops_incl_attn", 0) / bt if bt else None
            mfu_b = b.get("gflops_incl_attn") / peak if bt and peak else None
            mfu_h = flop_tok * ht / peak if flop_tok and ht and peak else None
            gib = lambda d: d.get("peak_mem_allocated_mb") / 1024 if d and d.get("peak_mem_allocated_mb") else None
            p("| %s | %s x %s | %s | %s | %s | %s | %s | %s | %s |" % (
                preset, b.get("batch_size"), b.get("seq_len"), fmt(bt, 5), fmt(ht, 5), fmt(ratio), fmt(gib(b)),
                fmt(gib(h)), fmt(mfu_b), fmt(mfu_h)))
        p()
        for preset, b, h in rows:
            for who, d in (("Burst", b), ("HF+PEFT", h)):
                if d and "error" in d:
                    p("- %s on %s failed: %s" % (who, preset, d["error"][:400]))
        p()

    srows = [(n[len("sample_burst_"):], d, st.get("sample_hf_" + n[len("sample_burst_"):]))
             for n, d in st.items() if n.startswith("sample_burst_")]
    if srows:
        first = srows[0][1] or {}
        p("## Sampling (greedy, KV cache, prompt %s, %s new tokens)" % (first.get("prompt_len"), first.get("new_tokens")))
        p()
        p("| shape, batch | Burst tok/s | HF generate tok/s | ratio |")
        p("| --- | --- | --- | --- |")
        for name, b, h in srows:
            bt = b.get("tokens_per_s") if b else None
            ht = h.get("tokens_per_s") if h else None
            p("| %s | %s | %s | %s |" % (name, fmt(bt, 5), fmt(ht, 5), fmt(bt / ht if bt and ht else None)))
        p()

    for name in ("resume_deterministic", "resume"):
        d = st.get(name)
        if d and "error" not in d and "skipped" not in d:
            p("Resume (%s, deterministic kernels %s): stopped at step %s of %s, resumed from %s; "
              "adapter bit-exact: %s; largest loss difference after resume: %s." % (
                  d.get("device"), "on" if d.get("deterministic") else "off", d.get("stop_at"), d.get("steps"),
                  d.get("resumed_from"), d.get("adapter_bit_exact"), fmt(d.get("max_loss_diff"))))
            p()
            p("Loss curve: " + ", ".join(fmt(x, 4) for x in d.get("losses", [])))
            p()

    goals = []
    for preset, b, h in rows:
        if b and h and b.get("tokens_per_s") and h.get("tokens_per_s"):
            r = b["tokens_per_s"] / h["tokens_per_s"]
            goals.append("%s: %.2fx the peer's tokens/s (goal 1.3x): %s" % (preset, r, "met" if r >= 1.3 else "NOT met"))
            bm, hm = b.get("peak_mem_allocated_mb"), h.get("peak_mem_allocated_mb")
            if bm and hm:
                goals.append("%s: peak memory %.1f GiB against %.1f GiB (goal: no more): %s" % (
                    preset, bm / 1024, hm / 1024, "met" if bm <= hm else "NOT met"))
        if preset == "llama3.1-8b" and b and b.get("gflops_incl_attn") and peak:
            mfu = b["gflops_incl_attn"] / peak
            goals.append("8B MFU %.0f%% (goal 40%%): %s" % (100 * mfu, "met" if mfu >= 0.4 else "NOT met"))
    if goals:
        p("## Goals")
        p()
        for g in goals:
            p("- " + g)
        p()


if __name__ == "__main__":
    main()
