#!/usr/bin/env bash
# Activation checkpointing against the same step without it (docs/bench.md,
# "Activation checkpointing"): `burst_bench train` on a random model of a
# preset (default the 100m: 12 layers, 768 wide, vocab 32000) at one
# sequence of SEQ tokens, LoRA and full, with and without
# --checkpoint-layers, alternating, ROUNDS times; the best time and the
# peak RSS of each side, and their ratios. One JSON line per method.
# Builds nothing: `cmake -DBURST_BENCH=ON` and build burst_bench first.
#
# Environment (defaults in brackets): PRESET [100m] SEQ [2048] BATCH [1]
# STEPS [2] ROUNDS [2] THREADS [2] BENCH [build/bench/burst_bench]
# PYTHON [.venv/bin/python]
set -euo pipefail
cd "$(dirname "$0")/.."
PRESET=${PRESET:-100m} SEQ=${SEQ:-2048} BATCH=${BATCH:-1} STEPS=${STEPS:-2} ROUNDS=${ROUNDS:-2}
THREADS=${THREADS:-2} BENCH=${BENCH:-build/bench/burst_bench} PYTHON=${PYTHON:-.venv/bin/python}
[ -x "$BENCH" ] || { echo "checkpoint_bench: $BENCH is not built (cmake -DBURST_BENCH=ON; build burst_bench)" >&2; exit 1; }
for method in lora full; do
  runs=()
  for _ in $(seq "$ROUNDS"); do
    for flag in "" "--checkpoint-layers"; do
      runs+=("$($BENCH train --preset "$PRESET" --method "$method" --batch-size "$BATCH" --seq-len "$SEQ" \
        --steps "$STEPS" --warmup 1 --threads "$THREADS" $flag 2>/dev/null | tail -1)")
    done
  done
  printf '%s\n' "${runs[@]}" | "$PYTHON" -c '
import json, sys
rows = [json.loads(l) for l in sys.stdin if l.strip()]
def best(on):
    side = [r for r in rows if r["checkpoint_layers"] == on]
    return min(r["step_s"] for r in side), max(r["peak_rss_mb"] for r in side), side[0]["last_loss"]
t0, m0, l0 = best(False)
t1, m1, l1 = best(True)
print(json.dumps({"method": rows[0]["method"], "seq_len": rows[0]["seq_len"], "threads": rows[0]["threads"],
                  "step_s": round(t0, 2), "step_s_checkpointed": round(t1, 2), "time_ratio": round(t1 / t0, 3),
                  "peak_rss_mb": m0, "peak_rss_mb_checkpointed": m1, "rss_ratio": round(m1 / m0, 3),
                  "same_last_loss": l0 == l1}))'
done
