#!/usr/bin/env bash
# One run on 2 processes of 1 thread each against 1 process of 1 thread, the
# same LoRA job, same run (the speed goal: at least 1.7x tokens/s),
# through the storage channel on a folder and through c10d Gloo; each
# member's loss curve against the single process's (grad_accum 2 there,
# 1 per member). docs/bench.md, "One run on two processes".
#
#   bench/data_parallel_bench.sh [ROUNDS] [STEPS]      (defaults 3, 24)
#
# tokens/s = the run's tokens / its training time (metrics.jsonl's last
# wall_s: from the start of training, model loading excluded); one line per
# round and side, then the medians and ratios.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
BURST="$ROOT/build/src/burst"
ROUNDS="${1:-3}"
STEPS="${2:-24}"
T="$(mktemp -d /tmp/burst-dp-bench-XXXXXX)"
trap 'rm -rf "$T"' EXIT
/usr/bin/python3 - "$ROOT" "$T" "$STEPS" <<'PY'
import json, sys
root, t, steps = sys.argv[1], sys.argv[2], int(sys.argv[3])
r = json.load(open(root + "/examples/support/recipe.json"))
r.update({"model": root + "/models/burst-small", "train_file": root + "/examples/support/train.jsonl",
          "threads": 1, "max_steps": steps, "batch_size": 8, "epochs": 1})
r.pop("valid_file", None)
json.dump(dict(r, grad_accum=2), open(t + "/one.json", "w"))
json.dump(dict(r, grad_accum=1), open(t + "/member.json", "w"))
PY
one() { "$BURST" train --config "$T/one.json" --out "$T/$1" --json > /dev/null; }
two() {  # $1: out prefix, $2: store|gloo
  local ex
  if [ "$2" = store ]; then ex="store:file://$T/$1-channel"; else ex="gloo:$T/$1-address"; fi
  "$BURST" train --config "$T/member.json" --out "$T/$1-0" --members 2 --rank 0 --exchange "$ex" \
    --json > /dev/null 2>&1 &
  local p0=$!
  "$BURST" train --config "$T/member.json" --out "$T/$1-1" --members 2 --rank 1 --exchange "$ex" \
    --json > /dev/null 2>&1
  wait "$p0"
}
for i in $(seq 1 "$ROUNDS"); do
  one "one-$i"
  two "store-$i" store
  two "gloo-$i" gloo
done
/usr/bin/python3 - "$T" "$ROUNDS" <<'PY'
import json, statistics, sys
t, rounds = sys.argv[1], int(sys.argv[2])
def lines(run):
    return [json.loads(l) for l in open(f"{t}/{run}/metrics.jsonl") if json.loads(l)["type"] == "train"]
def tok_s(run):
    last = lines(run)[-1]
    return last["tokens"] / last["wall_s"]
res = {"one": [], "store": [], "gloo": []}
worst = {"store": 0.0, "gloo": 0.0}
for i in range(1, rounds + 1):
    ref = [l["train_loss"] for l in lines(f"one-{i}")]
    res["one"].append(tok_s(f"one-{i}"))
    for side in ("store", "gloo"):
        res[side].append(tok_s(f"{side}-{i}-0"))
        for m in (0, 1):
            got = [l["train_loss"] for l in lines(f"{side}-{i}-{m}")]
            assert len(got) == len(ref), (side, i, m)
            worst[side] = max(worst[side], max(abs(a - b) / abs(b) for a, b in zip(got, ref)))
    print(json.dumps({"round": i, "one_tok_s": res["one"][-1], "store_tok_s": res["store"][-1],
                      "gloo_tok_s": res["gloo"][-1]}))
med = {k: statistics.median(v) for k, v in res.items()}
print(json.dumps({"rounds": rounds, "one_tok_s": med["one"], "store_tok_s": med["store"], "gloo_tok_s": med["gloo"],
                  "store_speedup": med["store"] / med["one"], "gloo_speedup": med["gloo"] / med["one"],
                  "loss_rel_diff_max": worst}))
PY
