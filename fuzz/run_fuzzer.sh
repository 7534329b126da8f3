#!/usr/bin/env bash
# run_fuzzer.sh FUZZER WORKDIR SEED... [-- LIBFUZZER_FLAG...]
#
# Runs one libFuzzer target for $FUZZ_SECONDS (default 60) on WORKDIR/corpus,
# which is seeded with the SEED files and folders (the test fixtures) and
# keeps what the fuzzer adds between runs. A crash, leak, timeout or
# sanitizer report fails with the reproducer's path and the command that
# replays it. CTest runs this for each target (label `fuzz`).
set -euo pipefail

fuzzer=$1 workdir=$2
shift 2
seeds=()
while [ $# -gt 0 ] && [ "$1" != "--" ]; do seeds+=("$1"); shift; done
[ $# -gt 0 ] && shift
flags=("$@")
seconds=${FUZZ_SECONDS:-60}
name=$(basename "$fuzzer")

mkdir -p "$workdir/corpus" "$workdir/artifacts"
for s in "${seeds[@]}"; do
  if [ -d "$s" ]; then
    find "$s" -maxdepth 1 -type f -exec cp -f {} "$workdir/corpus/" \;
  else
    cp -f "$s" "$workdir/corpus/"
  fi
done
# Findings of an earlier run are replaced, not mistaken for this run's.
rm -f "$workdir/artifacts/"*

status=0
"$fuzzer" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
  -artifact_prefix="$workdir/artifacts/" "${flags[@]}" "$workdir/corpus" \
  > "$workdir/fuzz.log" 2>&1 || status=$?
# The summary: executions, coverage, corpus size.
grep -E '^(Done|stat::number_of_executed_units|stat::peak_rss_mb|#[0-9]+ +DONE)' "$workdir/fuzz.log" || true
if [ "$status" -ne 0 ]; then
  tail -n 60 "$workdir/fuzz.log"
  for f in "$workdir/artifacts/"*; do
    [ -e "$f" ] || continue
    echo "$name: reproducer $f"
    echo "$name: replay with: $fuzzer $f"
  done
  echo "$name: FAILED (libFuzzer exit $status); full log: $workdir/fuzz.log"
  exit 1
fi
echo "$name: ${seconds}s without a finding"
