#!/usr/bin/env bash
# `make gang`: one job on two workers against the embedded control plane
# (burst serve under runs/gang-data, 2 slots of 1 thread, local workers).
# The same LoRA job runs on 1 worker with grad_accum 2, then on 2 workers
# over c10d Gloo and over the store channel; each 2-worker loss curve is
# compared with the 1-worker one step by step (they agree to 1e-5), and the
# estimate for 1, 2, 4 and 8 workers is printed at the end.
set -euo pipefail
cd "$(dirname "$0")/.."
BURST=${BURST:-build/src/burst}
DATA=${DATA:-runs/gang-data}
STEPS=${STEPS:-40}
. scripts/serve-local.sh
start_serve 2 30
FILE=$("$BURST" files upload examples/support/train.jsonl --json | /usr/bin/python3 -c 'import json,sys; print(json.load(sys.stdin)["id"])')
recipe() {  # $1: grad_accum
  echo "{\"max_steps\": $STEPS, \"batch_size\": 8, \"max_seq_len\": 256, \"checkpoint_every\": 20, \"grad_accum\": $1}" \
    >"$DATA/recipe-$1.json"
}
recipe 1
recipe 2
run() {  # $1: name, then flags for `burst jobs create`; prints the job id
  echo "== $1" >&2
  "$BURST" jobs create --model burst-small --training-file "$FILE" --seed 7 --wait --json "${@:2}" 2>/dev/null |
    /usr/bin/python3 -c 'import json,sys; print(json.load(sys.stdin)["id"])'
}
ONE=$(run "1 worker, grad_accum 2" --recipe "$DATA/recipe-2.json")
C10D=$(run "2 workers, c10d" --recipe "$DATA/recipe-1.json" --workers 2 --communication c10d)
STORE=$(run "2 workers, store channel" --recipe "$DATA/recipe-1.json" --workers 2 --communication store)
/usr/bin/python3 - "$ONE" "$C10D" "$STORE" <<'PY'
import json, os, sys, urllib.request
url, key = os.environ["BURST_URL"], os.environ["BURST_API_KEY"]
def get(path):
    req = urllib.request.Request(url + path, headers={"Authorization": "Bearer " + key})
    return json.loads(urllib.request.urlopen(req).read())
def losses(job):
    out = {}
    for e in get(f"/v1/fine_tuning/jobs/{job}/events?order=asc&limit=10000")["data"]:
        d = e.get("data") or {}
        if e.get("type") == "metrics" and d.get("type") == "train":
            out[d["step"]] = d["train_loss"]
    return out
one, ok = losses(sys.argv[1]), True
print(f"{'step':>5} {'1 worker, ga 2':>15} {'2 workers c10d':>15} {'2 workers store':>16}")
curves = [losses(j) for j in sys.argv[2:]]
for step in sorted(one):
    row = [one[step]] + [c.get(step, float("nan")) for c in curves]
    if step % 5 == 0 or step == 1:
        print(f"{step:>5} {row[0]:>15.6f} {row[1]:>15.6f} {row[2]:>16.6f}")
for name, c, job in zip(("c10d", "store"), curves, sys.argv[2:]):
    worst = max(abs(c[s] - one[s]) / abs(one[s]) for s in one)
    j = get(f"/v1/fine_tuning/jobs/{job}")
    print(f"2 workers over {name}: {j['status']}, {len(c)} steps, largest relative difference from 1 worker "
          f"with grad_accum 2: {worst:.1e} ({'within' if worst <= 1e-5 else 'NOT within'} 1e-5)")
    ok = ok and worst <= 1e-5 and j["status"] == "succeeded" and len(c) == len(one)
sys.exit(0 if ok else 1)
PY
echo "== the estimate for one epoch of this data on 1, 2, 4 and 8 workers (c10d), fitted to these jobs"
echo '{"epochs": 1, "batch_size": 8, "max_seq_len": 256, "checkpoint_every": 20}' >"$DATA/recipe-epoch.json"
"$BURST" jobs create --model burst-small --training-file "$FILE" --recipe "$DATA/recipe-epoch.json" --estimate \
  --workers 1,2,4,8 --communication c10d
