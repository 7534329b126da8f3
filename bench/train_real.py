#!/usr/bin/env python3
"""Training speed as users meet it: the real `burst train` on real data
against the peers a user would pick instead, in the same run, on the same
torch (docs/bench.md, "Training on real data"). `make bench` runs it after
scripts/bench.sh.

For each config (the shipped model; the ~100M preset with the shipped
tokenizer), dataset (the support-ticket demo; a chat set with a wide length
spread, bench/make_chat_data.py) and thread count, alternately:
  burst    `burst train` on the recipe (max_steps steps), tokens/s from its
           own metrics.jsonl (real tokens / step_s, after --warmup steps)
  sft      bench/peer_sft.py: TRL's SFTTrainer + PEFT, padding-free, on the
           same examples in the same steps (LoRA recipes only)
  padded   bench/peer_padded.py: HF Trainer + PEFT's way (dynamic padding,
           LM head over every position) on the same micro-batches
           (`burst_bench batches`)
  hot      bench/peer_train.py: the hot-step peer, random tokens (B, T) with
           B the recipe's batch size and T the data's mean length
  compiled the hot-step peer with its forward and loss under torch.compile
Then the whole demo recipe (examples/support/recipe.json, 450 steps) with
`burst train` and the padding peer, both doing its evals and checkpoints
(peer_padded.py --eval, --checkpoints): wall time to finish, the training
steps' share of it, and peak RSS.
Every process is timed and its peak RSS read by this script (wait4).

Writes a markdown report to stdout and build/bench/train_real.md, every run's
JSON to build/bench/train_real.jsonl.

Usage: .venv/bin/python bench/train_real.py [--threads 1,2] [--configs small,100m]
         [--data support,chat] [--peers burst,sft,padded,hot,compiled] [--repeats 2] [--steps 24]
         [--steps-100m 6] [--warmup 3] [--demo/--no-demo] [--burst build/src/burst]
         [--bench build/bench/burst_bench]
(`scripts/install-deps.sh --bench` installs TRL into .venv; `make bench-train` does.)
"""

import argparse
import json
import os
import shutil
import statistics as st
import subprocess
import sys
import tempfile
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
PY = os.path.join(ROOT, ".venv", "bin", "python")  # the project's venv: the peers' torch


def run_child(cmd, env=None):
    """Runs cmd as a child; (stdout, wall_s, peak_rss_mb of that child)."""
    t0 = time.perf_counter()
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        p = subprocess.Popen(cmd, stdout=out, stderr=err, env=env, text=True)
        _, status, ru = os.wait4(p.pid, 0)
        p.returncode = os.waitstatus_to_exitcode(status)
        wall = time.perf_counter() - t0
        out.seek(0)
        err.seek(0)
        if p.returncode != 0:
            raise SystemExit(f"train_real: {' '.join(cmd)} failed ({p.returncode}):\n{err.read()[-4000:]}")
        return out.read(), wall, ru.ru_maxrss / 1024.0


def last_json(text):
    lines = [line for line in text.strip().splitlines() if line.startswith("{")]
    return json.loads(lines[-1])


def mean_len(batches_path):
    n = tot = 0
    with open(batches_path) as f:
        for line in f:
            for ids in json.loads(line)["ids"]:
                n += 1
                tot += len(ids)
    return tot / n


def burst_tokens_per_s(run_dir, warmup):
    toks = secs = 0.0
    prev = 0
    with open(os.path.join(run_dir, "metrics.jsonl")) as f:
        for line in f:
            j = json.loads(line)
            if j.get("type") != "train":
                continue
            step_tokens = j["tokens"] - prev
            prev = j["tokens"]
            if j["step"] > warmup:
                toks += step_tokens
                secs += j["step_s"]
    return toks / secs if secs else None


def main():
    ap = argparse.ArgumentParser(description="real `burst train` vs PyTorch peers on real data")
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--configs", default="small,100m")
    ap.add_argument("--data", default="support,chat")
    ap.add_argument("--peers", default="burst,sft,padded,hot,compiled",
                    help="which of burst, sft, padded, hot, compiled to run")
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--steps", type=int, default=24, help="steps per throughput run (shipped model)")
    ap.add_argument("--steps-100m", type=int, default=6)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--warmup-100m", type=int, default=1)
    ap.add_argument("--demo", action=argparse.BooleanOptionalAction, default=True,
                    help="also the whole demo recipe, wall time to finish")
    ap.add_argument("--burst", default=os.path.join(ROOT, "build/src/burst"))
    ap.add_argument("--bench", default=os.path.join(ROOT, "build/bench/burst_bench"))
    ap.add_argument("--out-dir", default=os.path.join(ROOT, "build/bench"))
    a = ap.parse_args()
    for tool in (a.burst, a.bench):
        if not os.access(tool, os.X_OK):
            raise SystemExit(f"train_real: {tool} not found: run `make build` first (or `make bench`)")
    os.makedirs(a.out_dir, exist_ok=True)
    raw_path = os.path.join(a.out_dir, "train_real.jsonl")
    raw = open(raw_path, "w")
    tmp = tempfile.mkdtemp(prefix="burst-train-real-")
    start = time.time()
    env = dict(os.environ, OPENBLAS_THREAD_TIMEOUT="4")
    threads = [int(t) for t in a.threads.split(",")]
    results = []

    def record(rec):
        results.append(rec)
        raw.write(json.dumps(rec) + "\n")
        raw.flush()

    def log(msg):
        print(f"train_real: {msg}", file=sys.stderr, flush=True)

    # ---- models: the shipped one; the 100m preset with the shipped tokenizer
    small = os.path.join(ROOT, "models/burst-small")
    models = {"small": small}
    if "100m" in a.configs.split(","):
        m100 = os.path.join(tmp, "100m")
        subprocess.run([a.bench, "init", "--preset", "100m", "--seed", "0", "--out", m100], check=True,
                       stdout=subprocess.DEVNULL)
        for f in ("tokenizer.model", "tokenizer_config.json"):
            shutil.copy(os.path.join(small, f), m100)
        models["100m"] = m100
    # ---- data
    data = {"support": os.path.join(ROOT, "examples/support/train.jsonl")}
    if "chat" in a.data.split(","):
        chat = os.path.join(tmp, "chat.jsonl")
        subprocess.run([PY, os.path.join(ROOT, "bench/make_chat_data.py"), "--out", chat], check=True)
        data["chat"] = chat
    demo = json.load(open(os.path.join(ROOT, "examples/support/recipe.json")))

    def recipe_for(cfg, dname, nthreads, steps):
        r = dict(demo)
        r["model"] = models[cfg]
        r["train_file"] = data[dname]
        r.pop("valid_file", None)
        r["threads"] = nthreads
        r["checkpoint_every"] = 0
        if dname == "chat":
            r["max_seq_len"] = 1024
        if steps:
            r["max_steps"] = steps
        path = os.path.join(tmp, f"recipe-{cfg}-{dname}-{nthreads}-{steps}.json")
        json.dump(r, open(path, "w"), indent=1)
        return path

    # ---- throughput, alternating the three
    for cfg in a.configs.split(","):
        steps = a.steps if cfg == "small" else a.steps_100m
        warm = a.warmup if cfg == "small" else a.warmup_100m
        for dname in a.data.split(","):
            for nt in threads:
                recipe = recipe_for(cfg, dname, nt, steps)
                batches = os.path.join(tmp, f"batches-{cfg}-{dname}-{nt}.jsonl")
                info = last_json(subprocess.run([a.bench, "batches", "--recipe", recipe, "--out", batches],
                                                check=True, capture_output=True, text=True).stdout)
                t_mean = max(2, round(mean_len(batches)))
                batch = demo["batch_size"]
                lo = demo["lora"]

                def burst():
                    run = os.path.join(tmp, "run")
                    _, wall, rss = run_child([a.burst, "train", "--config", recipe, "--out", run, "--overwrite"], env)
                    return {"tokens_per_s": burst_tokens_per_s(run, warm), "wall_s": wall, "peak_rss_mb": rss}

                def on_batches(script):
                    # A peer that trains on Burst's batches: its JSON line, wall and peak RSS.
                    out, wall, rss = run_child([PY, os.path.join(ROOT, "bench", script), "--recipe", recipe,
                                                "--model", models[cfg], "--batches", batches, "--threads", str(nt),
                                                "--warmup", str(warm)], env)
                    return last_json(out), wall, rss

                def padded():
                    j, wall, rss = on_batches("peer_padded.py")
                    return {"tokens_per_s": j["tokens_per_s"], "wall_s": wall, "peak_rss_mb": rss,
                            "pad_fraction": j["pad_fraction"]}

                def sft():
                    j, wall, rss = on_batches("peer_sft.py")
                    return {"tokens_per_s": j["tokens_per_s"], "wall_s": wall, "peak_rss_mb": rss,
                            "versions": {k: j[k] for k in ("trl", "peft", "transformers", "torch")}}

                def hot(compiled=False):
                    out, wall, rss = run_child([PY, os.path.join(ROOT, "bench/peer_train.py"), "--model", models[cfg],
                                                "--method", "lora", "--rank", str(lo["rank"]), "--alpha",
                                                str(lo["alpha"]), "--targets", ",".join(lo["targets"]),
                                                "--batch-size", str(batch), "--seq-len", str(t_mean), "--steps",
                                                str(steps - warm), "--warmup", str(warm), "--threads", str(nt),
                                                "--lr", str(demo["learning_rate"])] + (["--compile"] if compiled else []),
                                               env)
                    j = last_json(out)
                    return {"tokens_per_s": j["tokens_per_s"], "wall_s": wall, "peak_rss_mb": rss,
                            "warmup_s": j["warmup_s"]}

                every = {"burst": burst, "sft": sft, "padded": padded, "hot": hot,
                         "compiled": lambda: hot(compiled=True)}
                impls = [(n, every[n]) for n in a.peers.split(",")]
                for rep in range(a.repeats):
                    order = impls if rep % 2 == 0 else impls[::-1]
                    for name, fn in order:
                        log(f"{cfg} {dname} threads {nt} {name}, repeat {rep + 1}/{a.repeats}")
                        rec = fn()
                        rec.update({"kind": "throughput", "config": cfg, "data": dname, "threads": nt,
                                    "impl": name, "repeat": rep + 1, "steps": steps, "warmup": warm,
                                    "mean_len": info["tokens"] / max(1, info["examples"]), "hot_seq_len": t_mean})
                        record(rec)

    # ---- the demo recipe to the end
    if a.demo:
        for nt in threads:
            recipe = recipe_for("small", "support", nt, 0)
            r = json.load(open(recipe))
            r["valid_file"] = os.path.join(ROOT, "examples/support/valid.jsonl")
            r["checkpoint_every"] = demo.get("checkpoint_every", 100)
            json.dump(r, open(recipe, "w"), indent=1)
            batches = os.path.join(tmp, f"batches-demo-{nt}.jsonl")
            held_out = os.path.join(tmp, f"eval-demo-{nt}.jsonl")
            subprocess.run([a.bench, "batches", "--recipe", recipe, "--out", batches, "--eval-out", held_out],
                           check=True, capture_output=True)

            def burst():
                run = os.path.join(tmp, "demo-run")
                _, wall, rss = run_child([a.burst, "train", "--config", recipe, "--out", run, "--overwrite"], env)
                evals = {}
                steps_s = 0.0
                with open(os.path.join(run, "metrics.jsonl")) as f:
                    for line in f:
                        j = json.loads(line)
                        if j.get("type") == "train":
                            steps_s += j["step_s"]
                        elif j.get("type") == "eval":
                            evals[j["step"]] = {k: v for k, v in j.items() if k.startswith("eval_")}
                return {"wall_s": wall, "peak_rss_mb": rss, "tokens_per_s": burst_tokens_per_s(run, a.warmup),
                        "train_s": steps_s, "base_eval": evals.get(0), "final_eval": evals.get(max(evals, default=0))}

            def padded():
                ckpt = os.path.join(tmp, "demo-peer-checkpoints")
                shutil.rmtree(ckpt, ignore_errors=True)
                os.makedirs(ckpt)
                out, wall, rss = run_child([PY, os.path.join(ROOT, "bench/peer_padded.py"), "--recipe", recipe,
                                            "--model", small, "--batches", batches, "--threads", str(nt),
                                            "--warmup", str(a.warmup), "--eval", held_out, "--checkpoints", ckpt],
                                           env)
                j = last_json(out)
                return {"wall_s": wall, "peak_rss_mb": rss, "tokens_per_s": j["tokens_per_s"],
                        "pad_fraction": j["pad_fraction"], "train_s": j["train_s"], "eval_s": j["eval_s"],
                        "checkpoint_s": j["checkpoint_s"], "base_eval": j["base_eval"], "final_eval": j["final_eval"]}

            for name, fn in ([("burst", burst), ("padded", padded)] if nt % 2 else [("padded", padded), ("burst", burst)]):
                log(f"demo recipe, threads {nt}: {name}")
                rec = fn()
                rec.update({"kind": "demo", "config": "small", "data": "support", "threads": nt, "impl": name})
                record(rec)

    shutil.rmtree(tmp, ignore_errors=True)
    wall = int(time.time() - start)
    report(results, a, wall)


def report(results, a, wall):
    def med(recs, key):
        vals = [r[key] for r in recs if r.get(key) is not None]
        return st.median(vals) if vals else None

    def pick(**kw):
        return [r for r in results if all(r.get(k) == v for k, v in kw.items())]

    commit = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"], capture_output=True,
                            text=True).stdout.strip()
    dirty = subprocess.run(["git", "-C", ROOT, "diff", "--quiet", "HEAD"]).returncode != 0
    cpu = next((line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo") if line.startswith("model name")), "?")
    lines = [f"# Training on real data, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}", "",
             f"- machine: {cpu}, nproc {os.cpu_count()}; load average at the end "
             f"{' '.join(open('/proc/loadavg').read().split()[:3])}",
             f"- commit {commit}{' (uncommitted changes)' if dirty else ''}; wall {wall // 60} min {wall % 60} s",
             f"- command: `.venv/bin/python bench/train_real.py --threads {a.threads} --configs {a.configs} "
             f"--data {a.data} --repeats {a.repeats} --steps {a.steps} --steps-100m {a.steps_100m} "
             f"--warmup {a.warmup}{'' if a.demo else ' --no-demo'}`", "",
             "Real (non-pad) tokens per second, medians; ratios Burst / peer (SFT: TRL's SFTTrainer + PEFT, "
             "padding-free; padding: the padding peer; hot / compiled: the hot-step peer eager / under "
             "torch.compile):", "",
             "| config | data | threads | Burst | SFT | padding | hot | compiled | Burst/SFT | Burst/padding "
             "| Burst/hot | Burst/compiled | pad fraction | RSS MB Burst / SFT / padding / hot / compiled |",
             "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|"]
    goals = []
    keys = []
    for r in results:
        k = (r["config"], r["data"], r["threads"])
        if r["kind"] == "throughput" and k not in keys:
            keys.append(k)
    impls = ("burst", "sft", "padded", "hot", "compiled")
    num = lambda x, f="{:,.0f}": f.format(x) if x is not None else "–"  # noqa: E731
    ratio = lambda x, y: f"{x / y:.2f}x" if x and y else "–"  # noqa: E731
    for cfg, dname, nt in keys:
        runs = {i: pick(kind="throughput", config=cfg, data=dname, threads=nt, impl=i) for i in impls}
        tps = {i: med(runs[i], "tokens_per_s") for i in impls}
        rss = {i: med(runs[i], "peak_rss_mb") for i in impls}
        b = tps["burst"]
        pad = med(runs["padded"], "pad_fraction")
        lines.append(f"| {cfg} | {dname} | {nt} | " + " | ".join(num(tps[i]) for i in impls) + " | " +
                     " | ".join(ratio(b, tps[i]) for i in impls[1:]) + f" | {num(pad, '{:.2f}')} | " +
                     " / ".join(num(rss[i]) for i in impls) + " |")
        if not b:
            continue
        peers_rss = [rss[i] for i in impls[1:] if rss[i]]
        low = min(peers_rss) if peers_rss else None
        parts = []
        if tps["sft"]:
            parts.append(f"{b / tps['sft']:.2f}x SFTTrainer (goal >= 2x): {'MET' if b >= 2 * tps['sft'] else 'NOT met'}")
        if tps["compiled"]:
            parts.append(f"{b / tps['compiled']:.2f}x the compiled hot step (goal >= 1.3x): "
                         f"{'MET' if b >= 1.3 * tps['compiled'] else 'NOT met'}")
        if low and rss["burst"]:
            parts.append(f"peak RSS {rss['burst']:,.0f} MB vs the lowest peer's {low:,.0f} MB (goal: no higher): "
                         f"{'MET' if rss['burst'] <= low else 'NOT met'}")
        if parts:
            goals.append(f"- {cfg} {dname} {nt} thread(s): " + "; ".join(parts))
    demo = [r for r in results if r["kind"] == "demo"]
    if demo:
        lines += ["", "The whole demo recipe (examples/support/recipe.json: 450 steps of 16 tickets), both sides doing "
                  "what the recipe asks: the held-out eval before training and at the end (loss, token accuracy, "
                  "exact match of greedy completions, label accuracy; the peer as bench/peer_eval.py describes) "
                  "and a checkpoint every 100 steps and at the end. Steps: the training steps alone (Burst's "
                  "metrics' step_s, the peer's own timing); the rest: start-up, evals, checkpoints.", "",
                  "| threads | Burst wall s | peer wall s | peer/Burst | Burst steps s | peer steps s | peer/Burst "
                  "| Burst rest s | peer evals s | Burst RSS MB | peer RSS MB |",
                  "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
        for nt in sorted({r["threads"] for r in demo}):
            b = next((r for r in demo if r["threads"] == nt and r["impl"] == "burst"), None)
            p = next((r for r in demo if r["threads"] == nt and r["impl"] == "padded"), None)
            if b and p:
                lines.append(f"| {nt} | {b['wall_s']:.0f} | {p['wall_s']:.0f} | {p['wall_s'] / b['wall_s']:.2f}x "
                             f"| {b['train_s']:.0f} | {p['train_s']:.0f} | {p['train_s'] / b['train_s']:.2f}x "
                             f"| {b['wall_s'] - b['train_s']:.0f} | {p['eval_s']:.0f} "
                             f"| {b['peak_rss_mb']:.0f} | {p['peak_rss_mb']:.0f} |")
                goals.append(f"- demo recipe, {nt} thread(s): {p['wall_s'] / b['wall_s']:.2f}x faster than the padding "
                             f"peer (goal >= 2x): {'MET' if p['wall_s'] >= 2 * b['wall_s'] else 'NOT met'}; its "
                             f"training steps alone {p['train_s'] / b['train_s']:.2f}x; "
                             f"RSS {b['peak_rss_mb'] / p['peak_rss_mb']:.2f}x")
                for side in (b, p):
                    if side.get("final_eval"):
                        goals.append(f"  - {'Burst' if side is b else 'peer'} final eval: " + ", ".join(
                            f"{k.removeprefix('eval_')} {v:.4f}" for k, v in side["final_eval"].items()
                            if v is not None))
    if goals:
        lines += ["", "Goals (2x SFTTrainer's tokens/s, 1.3x the compiled hot step, peak RSS no higher than the "
                  "lowest peer's; the demo recipe 2x faster than the padding peer to the end):", *goals]
    lines += ["", "Every run:", *[f"- {json.dumps(r)}" for r in results]]
    text = "\n".join(lines) + "\n"
    print(text)
    with open(os.path.join(a.out_dir, "train_real.md"), "w") as f:
        f.write(text)


if __name__ == "__main__":
    main()
