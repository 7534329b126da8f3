#!/usr/bin/env bash
# `make loops`: the RL loop of examples/loops/rl.py against the embedded
# control plane (burst serve under runs/loops-data, local workers): reward
# = the right label of a support ticket; prints the mean reward and the
# held-out label accuracy per step, from the base model's upward.
set -euo pipefail
cd "$(dirname "$0")/.."
BURST=${BURST:-build/src/burst}
DATA=${DATA:-runs/loops-data}
rm -rf "$DATA"
mkdir -p "$DATA"
LOG="$DATA/serve.log"
"$BURST" serve --data "$DATA" --listen 127.0.0.1:0 --scaledown-window 60 --slots "${SLOTS:-2}" --threads-per-slot 1 \
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
echo "burst serve is up at $BURST_URL (data in $DATA)"
/usr/bin/python3 "examples/loops/${LOOP:-rl}.py" "$@"
