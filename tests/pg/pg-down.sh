#!/bin/bash
# pg-down.sh DIR: stops the server pg-up.sh DIR PORT started (fast: open
# sessions are ended, their transactions rolled back). Nothing running:
# nothing to do.
set -euo pipefail
D=$(realpath "$1")
BIN=${BURST_PG_BIN:-/usr/lib/postgresql/15/bin}
[ -s "$D/pg/postmaster.pid" ] || exit 0
if [ "$(id -u)" = 0 ]; then
  runuser -u postgres -- "$BIN/pg_ctl" -D "$D/pg" -m fast -w -t 60 stop >/dev/null
else
  "$BIN/pg_ctl" -D "$D/pg" -m fast -w -t 60 stop >/dev/null
fi
