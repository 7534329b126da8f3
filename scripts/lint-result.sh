#!/usr/bin/env bash
# The lint's result, as the CTest test `lint` of the main build reports it.
# `make test` starts the lint (scripts/tidy.sh) in the background at its
# start, at the lowest CPU priority, so it runs in the time the other stages
# leave a core idle (installs waiting on the network, tests waiting on
# their services); its output goes to build-tidy.out, its exit status to
# build-tidy.rc, the pid of scripts/tidy.sh to build-tidy.pid. This waits for that lint and
# prints what it found; with none running or finished it runs the lint
# itself (`ctest` on its own).
set -uo pipefail
cd "$(dirname "$0")/.."
# A pid of an earlier run may since belong to another process: only a
# process whose command line runs the lint counts.
running() {
  local pid
  pid=$(cat build-tidy.pid 2>/dev/null) || return 1
  [ -n "$pid" ] && { tr '\0' ' ' <"/proc/$pid/cmdline"; } 2>/dev/null | grep -q tidy.sh
}
if [ ! -f build-tidy.rc ] && ! running && ! { sleep 2; [ -f build-tidy.rc ]; }; then
  exec scripts/tidy.sh
fi
while [ ! -f build-tidy.rc ]; do
  # Its status is written right after it ends: give that a moment.
  if ! running && ! { sleep 2; [ -f build-tidy.rc ]; }; then
    cat build-tidy.out 2>/dev/null
    echo "lint: the background lint (pid $(cat build-tidy.pid 2>/dev/null)) ended without a result" >&2
    exit 1
  fi
  sleep 1
done
cat build-tidy.out
exit "$(cat build-tidy.rc)"
