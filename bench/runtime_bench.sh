#!/usr/bin/env bash
# The serverless runtime's benchmarks (docs/bench.md, "Serverless runtime"):
#   1. control plane, in-process (build/bench/burst_runtime_bench):
#      a. job submissions per second through the HTTP API (+ references),
#      b. dispatch decision latency with ~10,000 jobs queued;
#   2. submit to first training step, cold and warm, against a real
#      `burst serve` (bench/runtime_e2e.py), as shipped and, unless
#      WHATIF=0, again with TCP_NODELAY on every socket (LD_PRELOAD shim).
# Builds nothing: `make bench-runtime` builds first.
#
# Environment (defaults in brackets):
#   JOBS [5000] CLIENTS [8] REF_JOBS [5000]        (1a)
#   ORGS [10] PER_ORG [1000] CYCLES [2000]          (1b)
#   E2E_JOBS [20] LINES [64] WHATIF [1]             (2)
#   PARTS ["submit dispatch e2e"]
#   BURST [build/src/burst] RTBENCH [build/bench/burst_runtime_bench] PYTHON [.venv/bin/python]
# Output: JSON lines and readable summaries on stdout/stderr; everything also
# goes to build/bench/runtime_results.txt, the JSON lines to
# build/bench/runtime_results.jsonl.
set -euo pipefail
cd "$(dirname "$0")/.."

JOBS=${JOBS:-5000}
CLIENTS=${CLIENTS:-8}
REF_JOBS=${REF_JOBS:-5000}
ORGS=${ORGS:-10}
PER_ORG=${PER_ORG:-1000}
CYCLES=${CYCLES:-2000}
E2E_JOBS=${E2E_JOBS:-20}
LINES=${LINES:-64}
WHATIF=${WHATIF:-1}
PARTS=${PARTS:-"submit dispatch e2e"}
BURST=${BURST:-build/src/burst}
RTBENCH=${RTBENCH:-build/bench/burst_runtime_bench}
PRELOAD=${PRELOAD:-build/bench/libburst_nodelay_preload.so}
PY=${PYTHON:-.venv/bin/python}
OUT_DIR=build/bench
TXT=$OUT_DIR/runtime_results.txt
JSONL=$OUT_DIR/runtime_results.jsonl

for f in "$RTBENCH" "$BURST"; do
  if [ ! -x "$f" ]; then
    echo "runtime_bench: $f not found: run \`make bench-runtime\` (it builds first)" >&2
    exit 1
  fi
done
mkdir -p "$OUT_DIR"
: > "$TXT"

log() { echo "$@" | tee -a "$TXT" >&2; }
run() {  # run CMD...: stdout (JSON lines) and stderr (summary) to the terminal and the files
  "$@" 2> >(tee -a "$TXT" >&2) | tee -a "$TXT"
}

log "== burst runtime bench, $(date -u '+%Y-%m-%d %H:%M UTC') =="
log "commit $(git rev-parse --short HEAD 2>/dev/null || echo '?')$(git diff --quiet 2>/dev/null || echo ' + working tree')"
log "machine: $(nproc) cores, $(lscpu | sed -n 's/^Model name: *//p'), $(free -g | awk '/Mem:/{print $2}') GiB"
log "load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"

for part in $PARTS; do
  case $part in
    submit)
      log "-- 1a: job submissions through the HTTP API --"
      run "$RTBENCH" submit --jobs "$JOBS" --clients "$CLIENTS" --reference-jobs "$REF_JOBS" ;;
    dispatch)
      log "-- 1b: dispatch decision with $((ORGS * PER_ORG)) jobs queued --"
      run "$RTBENCH" dispatch --orgs "$ORGS" --per-org "$PER_ORG" --cycles "$CYCLES" ;;
    e2e)
      log "-- 2: submit to first training step, as shipped --"
      run "$PY" bench/runtime_e2e.py --burst "$BURST" --jobs "$E2E_JOBS" --lines "$LINES"
      if [ "$WHATIF" != 0 ] && [ -f "$PRELOAD" ]; then
        log "-- 2 (what-if): the same with TCP_NODELAY on every socket --"
        run "$PY" bench/runtime_e2e.py --burst "$BURST" --jobs "$E2E_JOBS" --lines "$LINES" --preload "$PRELOAD"
      fi ;;
    *) echo "runtime_bench: unknown part $part" >&2; exit 2 ;;
  esac
  log "load average now: $(cut -d' ' -f1-3 /proc/loadavg)"
done
grep '^{' "$TXT" > "$JSONL" || true
log "results: $TXT, $JSONL"
