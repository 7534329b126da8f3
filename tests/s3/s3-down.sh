#!/bin/bash
# s3-down.sh DIR: stops what s3-up.sh DIR started (by pid files) and waits
# for it to exit; the folder is left for the caller to remove.
D=$(realpath "$1")
pids=()
for f in "$D"/run/*.pid; do
  [ -s "$f" ] || continue
  pid=$(cat "$f")
  kill "$pid" 2>/dev/null && pids+=("$pid")
done
for i in $(seq 1 100); do
  alive=0
  for pid in "${pids[@]}"; do kill -0 "$pid" 2>/dev/null && alive=1; done
  [ $alive = 0 ] && exit 0
  sleep 0.1
done
for pid in "${pids[@]}"; do kill -9 "$pid" 2>/dev/null; done
exit 0
