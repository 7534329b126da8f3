#!/bin/bash
# The metadata database on SQLite and PostgreSQL in one run (docs/bench.md,
# "Metadata on PostgreSQL"): job submissions per second (burst_db_bench:
# Metadata::CreateJob, Runtime::Submit, the HTTP API, two control planes on
# one database) and the dispatch cycle with 10,000 jobs queued
# (burst_runtime_bench dispatch: the decision, and Lease/Submit/Finish with
# their database writes), on one PostgreSQL 15 this script starts
# (tests/pg/pg-up.sh: unix socket, fsync on) and stops.
#
#   bench/db_bench.sh            # BUILD=build JOBS=3000 CLIENTS=8 ORGS=10 PER_ORG=1000 CYCLES=2000
#
# JSON lines on stdout, each tool's table on stderr.
set -euo pipefail
cd "$(dirname "$0")/.."
B=${BUILD:-build}
for t in burst_db_bench burst_runtime_bench; do
  if [ ! -x "$B/bench/$t" ]; then
    echo "db_bench.sh: $B/bench/$t is missing: cmake --build $B --target burst_db_bench burst_runtime_bench" >&2
    exit 1
  fi
done
D=$(mktemp -d /tmp/burst-db-bench-XXXXXX)
chmod 0755 "$D"  # the server's folder inside is the postgres user's
PORT=$((20000 + $$ % 20000))
cleanup() { tests/pg/pg-down.sh "$D/pg-server" >/dev/null 2>&1 || true; rm -rf "$D"; }
trap cleanup EXIT
mkdir -p "$D/pg-server"
tests/pg/pg-up.sh "$D/pg-server" "$PORT" >&2
url() { echo "postgresql://postgres@/$1?host=$D/pg-server&port=$PORT"; }
runuser -u postgres -- psql -q -h "$D/pg-server" -p "$PORT" -c "CREATE DATABASE dispatch" postgres >&2

echo "== submissions: burst_db_bench --jobs ${JOBS:-3000} --clients ${CLIENTS:-8}" >&2
"$B/bench/burst_db_bench" --postgres "$(url postgres)" --jobs "${JOBS:-3000}" --clients "${CLIENTS:-8}" --dir "$D"
dispatch=(dispatch --orgs "${ORGS:-10}" --per-org "${PER_ORG:-1000}" --cycles "${CYCLES:-2000}" --dir "$D")
echo "== dispatch on SQLite" >&2
"$B/bench/burst_runtime_bench" "${dispatch[@]}"
echo "== dispatch on PostgreSQL" >&2
"$B/bench/burst_runtime_bench" "${dispatch[@]}" --database "$(url dispatch)"
