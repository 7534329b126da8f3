# Sourced by the demo scripts (loops.sh, gang.sh): start_serve SLOTS WINDOW
# starts `burst serve` on a fresh $DATA (local workers of 1 thread, any free
# port), stops it when the script exits, waits until it listens and
# exports BURST_URL and BURST_API_KEY. Needs BURST and DATA set.
start_serve() {
  rm -rf "$DATA"
  mkdir -p "$DATA"
  LOG="$DATA/serve.log"
  "$BURST" serve --data "$DATA" --listen 127.0.0.1:0 --scaledown-window "$2" --slots "$1" --threads-per-slot 1 \
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
}
