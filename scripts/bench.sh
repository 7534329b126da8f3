#!/usr/bin/env bash
# Burst vs plain PyTorch eager: training tokens/s (LoRA and full), sampling
# tokens/s, peak RSS, and the fraction of this machine's GEMM peak that
# training reaches (docs/bench.md). Builds nothing: run `make build` first
# (`make bench` does both).
#
# For each config (the shipped model and the ~100M preset) it runs, in this
# one invocation: the GEMM peak, then Burst and the peer alternately
# (LoRA train, full train, sample), each pair REPEATS times with the order
# swapped every repeat, and reports medians. Burst and the peer always load
# the very same HF model folder, in separate processes (peak RSS is per
# process).
#
# Environment (defaults in brackets):
#   THREADS [nproc]  REPEATS [3]  CONFIGS ["small 100m"]
#   STEPS [8] WARMUP [2] SMALL_BATCH [8] SMALL_SEQ [128]          (shipped model)
#   STEPS_100M [3] WARMUP_100M [1] BATCH_100M [4] SEQ_100M [256]  (100m preset)
#   PROMPT_LEN [32] NEW_TOKENS [64] NEW_TOKENS_100M [32]          (sampling)
#   RANK [8] ALPHA [16] TARGETS [q,k,v,o,gate,up,down] LR [1e-4] SEED [0]
#   GEMM_SIZE [1024]  BENCH [build/bench/burst_bench]  PYTHON [.venv/bin/python]
#   SMALL_MODEL [models/burst-small; when absent, a random `small` preset, vocab 4096]
# Output: a markdown report on stdout and in build/bench/results.md; every
# run's JSON line in build/bench/results.tsv.
set -euo pipefail
cd "$(dirname "$0")/.."

BENCH=${BENCH:-build/bench/burst_bench}
PY=${PYTHON:-.venv/bin/python}
THREADS=${THREADS:-$(nproc)}
REPEATS=${REPEATS:-3}
CONFIGS=${CONFIGS:-"small 100m"}
STEPS=${STEPS:-8}
WARMUP=${WARMUP:-2}
SMALL_BATCH=${SMALL_BATCH:-8}
SMALL_SEQ=${SMALL_SEQ:-128}
STEPS_100M=${STEPS_100M:-3}
WARMUP_100M=${WARMUP_100M:-1}
BATCH_100M=${BATCH_100M:-4}
SEQ_100M=${SEQ_100M:-256}
PROMPT_LEN=${PROMPT_LEN:-32}
NEW_TOKENS=${NEW_TOKENS:-64}
NEW_TOKENS_100M=${NEW_TOKENS_100M:-32}
RANK=${RANK:-8}
ALPHA=${ALPHA:-16}
TARGETS=${TARGETS:-q,k,v,o,gate,up,down}
LR=${LR:-1e-4}
SEED=${SEED:-0}
GEMM_SIZE=${GEMM_SIZE:-1024}
SMALL_MODEL=${SMALL_MODEL:-models/burst-small}
OUT_DIR=build/bench
RAW=$OUT_DIR/results.tsv
RESULTS=$OUT_DIR/results.md

if [ ! -x "$BENCH" ]; then
  echo "bench: $BENCH not found: run \`make build\` first (or \`make bench\`)" >&2
  exit 1
fi
mkdir -p "$OUT_DIR"
: > "$RAW"
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
START=$(date +%s)

log() { echo "bench: $*" >&2; }

# record CONFIG KIND REPEAT CMD...: runs CMD, keeps its last stdout line (the JSON).
record() {
  local config=$1 kind=$2 rep=$3
  shift 3
  local line
  if ! line=$("$@" 2> "$TMP/stderr" | tail -n 1) || [ -z "$line" ]; then
    log "FAILED: $*"
    cat "$TMP/stderr" >&2
    exit 1
  fi
  printf '%s\t%s\t%s\t%s\n' "$config" "$kind" "$rep" "$line" >> "$RAW"
}

# ---- the models, one HF folder each (Burst and the peer load the same one)
declare -A MODEL NOTE BATCH SEQ NSTEPS NWARM NNEW
for cfg in $CONFIGS; do
  case $cfg in
    small)
      if [ -f "$SMALL_MODEL/config.json" ]; then
        MODEL[small]=$SMALL_MODEL
        NOTE[small]="shipped model $SMALL_MODEL"
      else
        MODEL[small]=$TMP/small
        NOTE[small]="$SMALL_MODEL absent: random \`small\` preset, vocab 4096 (same shape)"
        "$BENCH" init --preset small --vocab 4096 --seed "$SEED" --out "$TMP/small" > /dev/null
      fi
      BATCH[small]=$SMALL_BATCH; SEQ[small]=$SMALL_SEQ
      NSTEPS[small]=$STEPS; NWARM[small]=$WARMUP; NNEW[small]=$NEW_TOKENS
      ;;
    100m)
      MODEL[100m]=$TMP/100m
      NOTE[100m]="random \`100m\` preset (12 x 768, GQA 12/4, FFN 2048, vocab 32000, tied)"
      "$BENCH" init --preset 100m --seed "$SEED" --out "$TMP/100m" > /dev/null
      BATCH[100m]=$BATCH_100M; SEQ[100m]=$SEQ_100M
      NSTEPS[100m]=$STEPS_100M; NWARM[100m]=$WARMUP_100M; NNEW[100m]=$NEW_TOKENS_100M
      ;;
    *) echo "bench: unknown config $cfg (small, 100m)" >&2; exit 1 ;;
  esac
done

# ---- GEMM peak of this machine at this thread count
for ((r = 1; r <= REPEATS; r++)); do
  record all gemm "$r" "$BENCH" gemm --threads "$THREADS" --size "$GEMM_SIZE"
done

# ---- the same OpenBLAS kernels for the peer: Burst corrects a pre-AVX2
# fallback (src/core/blas_core.h), which the peer's torch would keep
if [ -z "${OPENBLAS_CORETYPE:-}" ]; then
  core=$(tail -n 1 "$RAW" | cut -f4 | "$PY" -c 'import json, sys; print(json.loads(sys.stdin.read()).get("blas", ""))')
  [ -n "$core" ] && export OPENBLAS_CORETYPE=$core
fi

# ---- Burst and the peer, alternately
for cfg in $CONFIGS; do
  m=${MODEL[$cfg]}
  for method in lora full; do
    common=(--model "$m" --method "$method" --rank "$RANK" --alpha "$ALPHA" --targets "$TARGETS"
            --batch-size "${BATCH[$cfg]}" --seq-len "${SEQ[$cfg]}" --steps "${NSTEPS[$cfg]}"
            --warmup "${NWARM[$cfg]}" --threads "$THREADS" --lr "$LR" --seed "$SEED")
    for ((r = 1; r <= REPEATS; r++)); do
      log "$cfg $method train, repeat $r/$REPEATS"
      burst=(record "$cfg" "$method" "$r" "$BENCH" train "${common[@]}")
      peer=(record "$cfg" "$method" "$r" "$PY" bench/peer_train.py "${common[@]}")
      if ((r % 2)); then "${burst[@]}"; "${peer[@]}"; else "${peer[@]}"; "${burst[@]}"; fi
    done
  done
  scommon=(--model "$m" --prompt-len "$PROMPT_LEN" --new-tokens "${NNEW[$cfg]}" --threads "$THREADS"
           --seed "$SEED")
  for ((r = 1; r <= REPEATS; r++)); do
    log "$cfg sample, repeat $r/$REPEATS"
    burst=(record "$cfg" sample "$r" "$BENCH" sample "${scommon[@]}")
    peer=(record "$cfg" sample "$r" "$PY" bench/peer_sample.py "${scommon[@]}")
    if ((r % 2)); then "${burst[@]}"; "${peer[@]}"; else "${peer[@]}"; "${burst[@]}"; fi
  done
done

# ---- the report
export BENCH_WALL_S=$(($(date +%s) - START))
export BENCH_MACHINE="$(lscpu | sed -n 's/^Model name:[[:space:]]*//p' | head -n 1)"
export BENCH_CORES="$(lscpu | sed -n 's/^CPU(s):[[:space:]]*//p' | head -n 1)"
export BENCH_NPROC="$(nproc)"
export BENCH_DATE="$(date -u '+%Y-%m-%d %H:%M UTC')"
export BENCH_COMMIT="$(git rev-parse --short HEAD 2> /dev/null || echo unknown)$(git diff --quiet HEAD 2> /dev/null || echo ' (uncommitted changes)')"
export BENCH_LOAD="$(cut -d' ' -f1-3 /proc/loadavg)"
export BENCH_COMMAND="THREADS=$THREADS REPEATS=$REPEATS CONFIGS=\"$CONFIGS\" STEPS=$STEPS WARMUP=$WARMUP SMALL_BATCH=$SMALL_BATCH SMALL_SEQ=$SMALL_SEQ STEPS_100M=$STEPS_100M WARMUP_100M=$WARMUP_100M BATCH_100M=$BATCH_100M SEQ_100M=$SEQ_100M PROMPT_LEN=$PROMPT_LEN NEW_TOKENS=$NEW_TOKENS NEW_TOKENS_100M=$NEW_TOKENS_100M scripts/bench.sh"
export BENCH_THREADS=$THREADS BENCH_REPEATS=$REPEATS BENCH_RAW=$RAW BENCH_PROMPT_LEN=$PROMPT_LEN
for cfg in $CONFIGS; do
  export "BENCH_NOTE_$cfg=${NOTE[$cfg]}"
  export "BENCH_SHAPE_$cfg=B ${BATCH[$cfg]}, T ${SEQ[$cfg]}, ${NSTEPS[$cfg]} timed + ${NWARM[$cfg]} warmup steps; sample +${NNEW[$cfg]}"
done

"$PY" - << 'EOF' | tee "$RESULTS"
import json, os, statistics as st

rows = {}
for line in open(os.environ["BENCH_RAW"]):
    cfg, kind, rep, js = line.rstrip("\n").split("\t", 3)
    rec = json.loads(js)
    impl = "burst" if rec.get("impl") == "burst" else "peer"
    rows.setdefault((cfg, kind, impl), []).append(rec)

def med(recs, key):
    vals = [r[key] for r in recs if r.get(key) is not None]
    return st.median(vals) if vals else None

def fmt(x, d=0):
    return "–" if x is None else f"{x:,.{d}f}"

def ratio(a, b):
    return "–" if a is None or not b else f"{a / b:.2f}x"

gemm = rows.get(("all", "gemm", "burst"), [])
peak = max((r["gflops"] for r in gemm), default=None)
E = os.environ
print(f"# Burst benchmark, {E['BENCH_DATE']}\n")
print(f"- machine: {E['BENCH_MACHINE']}, {E['BENCH_CORES']} CPUs (lscpu), nproc {E['BENCH_NPROC']}, "
      f"load average at the end {E['BENCH_LOAD']}")
torch_v = next((r[0].get("torch") for k, r in rows.items() if k[2] == "peer"), "?")
burst_torch = gemm[0]["torch"] if gemm else "?"
print(f"- commit {E['BENCH_COMMIT']}; libtorch {burst_torch} (Burst), torch {torch_v} (peer)")
print(f"- threads {E['BENCH_THREADS']}; medians of {E['BENCH_REPEATS']} alternating Burst/peer runs; "
      f"wall {int(E['BENCH_WALL_S']) // 60} min {int(E['BENCH_WALL_S']) % 60} s")
print(f"- command: `{E['BENCH_COMMAND']}`")
cores = {impl: sorted({r.get("blas", "?") for k, rs in rows.items() if k[2] == impl for r in rs}) for impl in ("burst", "peer")}
print(f"- OpenBLAS kernels: Burst {', '.join(cores['burst']) or '?'}, peer {', '.join(cores['peer']) or '?'}"
      + ("" if cores["burst"] == cores["peer"] else " (they differ: the comparison is not like for like)"))
if peak:
    print(f"- GEMM peak: {fmt(peak, 1)} GFLOP/s (float32 {gemm[0]['size']}^3 matmul, best of "
          f"{gemm[0]['repeats']} x {len(gemm)} runs: {', '.join(fmt(r['gflops'], 1) for r in gemm)})")
print()
print("| config | benchmark | Burst tok/s | peer tok/s | Burst/peer | Burst RSS MB | peer RSS MB "
      "| RSS Burst/peer | Burst GFLOP/s (% GEMM peak) | peer GFLOP/s (% GEMM peak) |")
print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|")
notes, runs, goals = [], [], []
cfgs = []
for (cfg, kind, impl) in rows:
    if cfg != "all" and cfg not in cfgs:
        cfgs.append(cfg)
for cfg in cfgs:
    notes.append(f"- **{cfg}**: {E.get('BENCH_NOTE_' + cfg, '')}; {E.get('BENCH_SHAPE_' + cfg, '')}")
    for kind, label in (("lora", "LoRA train"), ("full", "full train"), ("sample", "sample (greedy)")):
        b, p = rows.get((cfg, kind, "burst"), []), rows.get((cfg, kind, "peer"), [])
        if not b and not p:
            continue
        key = "tokens_per_s" if kind != "sample" else "sample_tokens_per_s"
        bt, pt = med(b, key), med(p, key)
        br, pr = med(b, "peak_rss_mb"), med(p, "peak_rss_mb")
        bg = pg = "–"
        if kind != "sample" and b and bt:
            flops_tok = med(b, "gflops") * 1e9 / bt  # same formula for both (docs/bench.md)
            g_b, g_p = flops_tok * bt / 1e9, (flops_tok * pt / 1e9 if pt else None)
            pct = lambda g: f" ({100 * g / peak:.0f}%)" if peak and g else ""
            bg = fmt(g_b, 1) + pct(g_b)
            pg = (fmt(g_p, 1) + pct(g_p)) if g_p else "–"
        if kind == "sample":
            label += f", prompt {b[0]['prompt_len'] if b else '?'} +{b[0]['new_tokens'] if b else '?'}"
            bd, pd = med(b, "decode_tokens_per_s"), med(p, "decode_tokens_per_s")
            label += f"; decode tok/s {fmt(bd)} vs {fmt(pd)}"
        print(f"| {cfg} | {label} | {fmt(bt)} | {fmt(pt)} | {ratio(bt, pt)} | {fmt(br)} | {fmt(pr)} "
              f"| {ratio(br, pr)} | {bg} | {pg} |")
        runs.append(f"- {cfg} {kind}: Burst {', '.join(fmt(r[key]) for r in b)}; "
                    f"peer {', '.join(fmt(r[key]) for r in p)} tok/s")
        if kind != "sample" and b and p:
            d = max(abs(x["first_loss"] - y["first_loss"]) for x in b for y in p)
            runs[-1] += f"; first loss Burst {b[0]['first_loss']:.4f}, peer {p[0]['first_loss']:.4f} (max diff {d:.1e})"
        if kind == "sample" and b and p:
            same = all(x["first_tokens"] == y["first_tokens"] for x in b for y in p)
            runs[-1] += f"; first tokens {'identical' if same else 'DIFFER'}"
        if kind == "lora" and bt and pt and br and pr:
            ok = bt >= 2 * pt and br <= pr
            goals.append(f"- {cfg}: LoRA {bt / pt:.2f}x the peer's tokens/s, peak RSS {br / pr:.2f}x "
                         f"-> goal (>= 2x, RSS <= peer) {'MET' if ok else 'NOT met'}")
print()
print("Configs:\n" + "\n".join(notes) + "\n")
if goals:
    print("Goal:\n" + "\n".join(goals) + "\n")
print("Every run (tokens/s, in run order; same-weights parity check):\n" + "\n".join(runs))
EOF
log "report written to $RESULTS"
