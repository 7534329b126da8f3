#!/usr/bin/env bash
# `make run`: a whole burst through the API. Starts the embedded control
# plane (`burst serve`: SQLite + file store under runs/demo-data, local
# workers, 3 slots), uploads the support-ticket demo data, sweeps three LoRA
# variants side by side, compares them with the base model on the held-out
# split, samples the best, evaluates it as a job of its own, deploys it,
# asks the deployment one question,
# deletes it, prints the cost of each usage line, and shows the worker pool
# back at zero.
set -euo pipefail
cd "$(dirname "$0")/.."
BURST=${BURST:-build/src/burst}
DATA=${DATA:-runs/demo-data}
WINDOW=${WINDOW:-5}  # scaledown window of the demo server, seconds (default 60)

rm -rf "$DATA"
mkdir -p "$DATA"
LOG="$DATA/serve.log"
"$BURST" serve --data "$DATA" --listen 127.0.0.1:0 --scaledown-window "$WINDOW" --slots 3 --threads-per-slot 1 \
  >"$LOG" 2>&1 &
SERVE=$!
trap 'kill "$SERVE" 2>/dev/null || true; wait "$SERVE" 2>/dev/null || true' EXIT
for _ in $(seq 100); do
  grep -q "listening on" "$LOG" && break
  kill -0 "$SERVE" 2>/dev/null || { cat "$LOG"; exit 1; }
  sleep 0.1
done
export BURST_URL=$(sed -n 's/.*listening on \(http[^ ]*\).*/\1/p' "$LOG")
export BURST_API_KEY=$(cat "$DATA/admin.key")
echo "burst serve is up at $BURST_URL (data in $DATA, scaledown window ${WINDOW}s)"
echo "the dashboard, while this runs: $BURST_URL/ (API key in $DATA/admin.key)"
printf "pool before: "
"$BURST" workers
echo

# The burst: three LoRA variants (learning rates) side by side, one slot each.
"$BURST" sweep create --model burst-small \
  --training-file examples/support/train.jsonl --validation-file examples/support/valid.jsonl \
  --recipe examples/support/sweep_recipe.json --suffix support \
  --grid learning_rate=0.0005,0.001,0.002 --metric eval_label_acc --wait | tee "$DATA/sweep.txt"
SWEEP=$(grep -o 'sweep-[a-z0-9]*' "$DATA/sweep.txt" | head -n 1)
"$BURST" sweep get "$SWEEP" --metric eval_label_acc --json >"$DATA/sweep.json"
json() { /usr/bin/python3 -c "import json,sys; d=json.load(open('$1')); print($2)"; }
BEST_JOB=$(json "$DATA/sweep.json" "d['best']['job_id']")
BEST=$(json "$DATA/sweep.json" "d['best']['fine_tuned_model']")
"$BURST" jobs get "$BEST_JOB" --json >"$DATA/best.json"
echo
echo "against the base model, on the held-out split (examples/support/valid.jsonl):"
/usr/bin/python3 - "$DATA/sweep.json" "$DATA/best.json" <<'PY'
import json, sys
sweep, best = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
base = (best.get("result") or {}).get("baseline") or {}
print(f"  {'run':<34} {'label acc':>9} {'loss':>8} {'cost':>9}")
print(f"  {'base model (no fine-tuning)':<34} {base.get('eval_label_acc', float('nan')):>9.4f} {base.get('eval_loss', float('nan')):>8.4f} {'-':>9}")
for r in sweep["runs"]:
    m = r.get("metrics") or {}
    name = " ".join(f"{k}={v}" for k, v in r["overrides"].items())
    mark = "  <- best" if r["job_id"] == sweep["best"]["job_id"] else ""
    print(f"  {name:<34} {m.get('eval_label_acc', float('nan')):>9.4f} {m.get('eval_loss', float('nan')):>8.4f} ${r['usage']['cost']:>8.4f}{mark}")
PY
echo

sampler=$(ls -d "$DATA"/store/objects/orgs/*/jobs/"$BEST_JOB"/checkpoints/step-*/sampler | sort | tail -n 1)
echo "a held-out ticket (examples/support/ticket.json):"
sed -n 's/.*"content": "\(.*\)"$/  \1/p' examples/support/ticket.json | tail -n 1
printf "the best run says (burst sample on its checkpoint folder): "
"$BURST" sample --model "$sampler" --messages examples/support/ticket.json --temperature 0 --max-tokens 8
echo

echo "the best checkpoint evaluated again, as a job of its own (billed as evaluation):"
"$BURST" eval --remote --model "$BEST" --data examples/support/valid.jsonl
echo

echo "deploying $BEST as support-bot (scales from zero):"
"$BURST" deployments create support-bot --checkpoint "$BEST" --scaledown-window 30
printf "support-bot answers: "
"$BURST" chat support-bot --messages examples/support/ticket.json --max-tokens 8
"$BURST" deployments list
"$BURST" deployments delete support-bot
echo

echo "usage billed to your organisation:"
"$BURST" usage
echo
printf "waiting for the pool to scale back to zero"
for _ in $(seq $((WINDOW * 4 + 40))); do
  "$BURST" workers --json | grep -q '"data": \[\]' && break
  printf "."
  sleep 0.5
done
echo
printf "pool after: "
"$BURST" workers
echo
echo "try it yourself: start a server on this data ($BURST serve --data $DATA) and, in another shell,"
echo "  export BURST_URL=http://127.0.0.1:8470 BURST_API_KEY=\$(cat $DATA/admin.key)"
echo "  $BURST sweep get $SWEEP"
echo "  $BURST jobs events $BEST_JOB"
echo "  $BURST eval --remote --model $BEST --data examples/support/valid.jsonl"
echo "  $BURST chat $BEST --messages examples/support/ticket.json"
echo "  open http://127.0.0.1:8470/ and paste the key: the dashboard (this sweep's curves, the pool, the cost)"
echo "  curl -H \"Authorization: Bearer \$(cat $DATA/metrics.token)\" http://127.0.0.1:8470/metrics   # Prometheus"
echo "  any OpenAI client: base URL http://127.0.0.1:8470/v1, model $BEST"
