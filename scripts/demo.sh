#!/usr/bin/env bash
# `make run`: the serverless path end to end. Starts the embedded control
# plane (`burst serve`: SQLite + file store under runs/demo-data, local
# workers), uploads the support-ticket demo data, submits the demo LoRA
# fine-tune through the API and follows it, prints baseline vs fine-tuned
# accuracy and the job's cost, classifies one held-out ticket with the
# result, and shows the worker pool back at zero.
set -euo pipefail
cd "$(dirname "$0")/.."
BURST=${BURST:-build/src/burst}
DATA=${DATA:-runs/demo-data}
WINDOW=${WINDOW:-5}  # scaledown window of the demo server, seconds (default 60)

rm -rf "$DATA"
mkdir -p "$DATA"
LOG="$DATA/serve.log"
"$BURST" serve --data "$DATA" --listen 127.0.0.1:0 --scaledown-window "$WINDOW" >"$LOG" 2>&1 &
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
printf "pool before: "
"$BURST" workers
echo

"$BURST" jobs create --model burst-small \
  --training-file examples/support/train.jsonl --validation-file examples/support/valid.jsonl \
  --recipe examples/support/job_recipe.json --suffix support --wait | tee "$DATA/job.txt"
JOB=$(grep -o 'ftjob-[a-z0-9]*' "$DATA/job.txt" | head -n 1)

sampler=$(ls -d "$DATA"/store/objects/orgs/*/jobs/"$JOB"/checkpoints/step-*/sampler | sort | tail -n 1)
echo
echo "a held-out ticket (examples/support/ticket.json):"
sed -n 's/.*"content": "\(.*\)"$/  \1/p' examples/support/ticket.json | tail -n 1
printf "fine-tuned model says: "
"$BURST" sample --model "$sampler" --messages examples/support/ticket.json --temperature 0 --max-tokens 8
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
echo "  $BURST jobs get $JOB"
echo "  $BURST jobs events $JOB"
echo "  $BURST logs $JOB"
echo "  $BURST sample --model $sampler --messages examples/support/ticket.json --temperature 0"
