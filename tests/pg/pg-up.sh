#!/bin/bash
# pg-up.sh DIR PORT [-c NAME=VALUE]...: a PostgreSQL 15 server for tests
# (and bench/db_bench), its data in DIR/pg,
# listening on a unix socket in DIR only (DIR/.s.PGSQL.PORT; no TCP), its
# log in DIR/pg.log. Encoding UTF8, locale C. The superuser `postgres` logs
# in without a password (trust); every other role with its password
# (scram-sha-256). Settings after PORT go to the server (the unit tests
# pass -c fsync=off). DIR already initialised: the server is started again
# (restart tests). Stop it with pg-down.sh DIR.
# initdb and the server refuse to run as root: as root, DIR is given to the
# `postgres` user (the package creates it) and they run as that user.
# BURST_PG_BIN overrides /usr/lib/postgresql/15/bin.
set -euo pipefail
if [ $# -lt 2 ]; then
  echo "usage: pg-up.sh DIR PORT [-c NAME=VALUE]..." >&2
  exit 2
fi
D=$(realpath "$1")
PORT=$2
shift 2
EXTRA="$*"
BIN=${BURST_PG_BIN:-/usr/lib/postgresql/15/bin}
if [ ! -x "$BIN/initdb" ] || [ ! -x "$BIN/pg_ctl" ]; then
  echo "pg-up.sh: PostgreSQL 15 is not installed ($BIN/initdb not found): install postgresql-15 (scripts/install-deps.sh)" >&2
  exit 1
fi
as_server() {
  if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
}
if [ "$(id -u)" = 0 ]; then
  if ! id postgres >/dev/null 2>&1; then
    echo "pg-up.sh: running as root, and there is no postgres user to run the server as" >&2
    exit 1
  fi
  chown postgres "$D"
fi
if [ ! -s "$D/pg/PG_VERSION" ]; then
  if ! as_server "$BIN/initdb" --no-sync -D "$D/pg" -U postgres -E UTF8 --locale=C --auth-local=trust \
      --auth-host=reject >"$D/initdb.log" 2>&1; then
    echo "pg-up.sh: initdb failed:" >&2
    cat "$D/initdb.log" >&2
    exit 1
  fi
  cat >"$D/pg/pg_hba.conf" <<HBA
local all postgres trust
local all all scram-sha-256
HBA
fi
if ! as_server "$BIN/pg_ctl" -D "$D/pg" -l "$D/pg.log" -w -t 60 \
    -o "-k $D -p $PORT -c listen_addresses='' $EXTRA" start >/dev/null; then
  echo "pg-up.sh: the server did not start; its log ($D/pg.log):" >&2
  tail -n 30 "$D/pg.log" >&2 || true
  exit 1
fi
