#!/usr/bin/env bash
# Synchronous (BSP) against model averaging (LambdaML's MA-SGD) on the
# storage channel, the demo LoRA task: 2 processes of 1 thread each with
# gradients summed every step, and with weights and optimizer moments
# averaged every K steps (K = 4 and 16), beside 1 process with grad_accum 2
# (what BSP equals). For each: the train loss (mean of each tenth of the
# run), the held-out loss at the end, tokens/s and the bytes each member put
# into the channel per step. docs/bench.md, "Model averaging".
#
#   bench/model_averaging_bench.sh [STEPS]      (default 120)
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
BURST="$ROOT/build/src/burst"
STEPS="${1:-120}"
T="$(mktemp -d /tmp/burst-ma-bench-XXXXXX)"
trap 'rm -rf "$T"' EXIT
/usr/bin/python3 - "$ROOT" "$T" "$STEPS" <<'PY'
import json, sys
root, t, steps = sys.argv[1], sys.argv[2], int(sys.argv[3])
r = json.load(open(root + "/examples/support/recipe.json"))
r.update({"model": root + "/models/burst-small", "train_file": root + "/examples/support/train.jsonl",
          "valid_file": root + "/examples/support/valid.jsonl", "threads": 1, "max_steps": steps,
          "batch_size": 8, "eval_every": 0, "checkpoint_every": 0})
json.dump(dict(r, grad_accum=2), open(t + "/one.json", "w"))
json.dump(dict(r, grad_accum=1), open(t + "/member.json", "w"))
PY
"$BURST" train --config "$T/one.json" --out "$T/one" --json > /dev/null
two() {  # $1: name, $2: K (0 = BSP)
  local ex="store:file://$T/$1-channel"
  "$BURST" train --config "$T/member.json" --out "$T/$1-0" --members 2 --rank 0 --exchange "$ex" \
    --average-every "$2" --json > /dev/null 2>&1 &
  local p0=$!
  "$BURST" train --config "$T/member.json" --out "$T/$1-1" --members 2 --rank 1 --exchange "$ex" \
    --average-every "$2" --json > /dev/null 2>&1
  wait "$p0"
}
two bsp 0
two ma4 4
two ma16 16
/usr/bin/python3 - "$T" "$STEPS" <<'PY'
import json, sys
t, steps = sys.argv[1], int(sys.argv[2])
import glob, os
# Trainable floats: the final checkpoint's trainable.safetensors (4 bytes each).
trainable = glob.glob(f"{t}/one/checkpoints/*/state/trainable.safetensors")[0]
p = os.path.getsize(trainable) / 4
# What one member puts into the channel per step (ScatterReduce: its
# vector's share for the others plus its partition's sum, about the whole
# vector): BSP the gradients, MA the stats and 3x the weights (weights and
# both moments) every K steps.
per_step = {"one": 0, "bsp-0": 4 * (p + 3), "ma4-0": 4 * (3 + 3 * p / 4), "ma16-0": 4 * (3 + 3 * p / 16)}
for side, run in (("1 process, grad_accum 2", "one"), ("2 members, BSP", "bsp-0"),
                  ("2 members, MA every 4", "ma4-0"), ("2 members, MA every 16", "ma16-0")):
    lines = [json.loads(l) for l in open(f"{t}/{run}/metrics.jsonl")]
    train = [l for l in lines if l["type"] == "train"]
    evals = [l for l in lines if l["type"] == "eval"]
    tenth = max(1, len(train) // 10)
    curve = [round(sum(l["train_loss"] for l in train[i:i + tenth]) / tenth, 4) for i in range(0, len(train), tenth)]
    last = train[-1]
    out = {"run": side, "steps": len(train), "train_loss_by_tenth": curve,
           "eval_loss_start": evals[0]["eval_loss"], "eval_loss_end": evals[-1]["eval_loss"],
           "tok_s": round(last["tokens"] / last["wall_s"], 1),
           "exchange_s": round(sum(l.get("exchange_s", 0) for l in train), 3),
           "channel_kb_per_step": round(per_step[run] / 1024, 1)}
    print(json.dumps(out))
PY
