#!/bin/bash
# slurm-down.sh DIR: stops what slurm-up.sh DIR started (munged stays).
D=$(realpath "$1")
export SLURM_CONF=$D/slurm.conf
scancel --quiet --full -u root 2>/dev/null || true
if [ -s "$D/slurmrestd.conf-path" ]; then rm -f "$(cat "$D/slurmrestd.conf-path")"; fi
for p in slurmrestd slurmd slurmctld; do
  [ -s "$D/$p.pid" ] && kill "$(cat "$D/$p.pid")" 2>/dev/null || true
done
for _ in $(seq 1 50); do
  alive=0
  for p in slurmrestd slurmd slurmctld; do
    [ -s "$D/$p.pid" ] && kill -0 "$(cat "$D/$p.pid")" 2>/dev/null && alive=1
  done
  [ $alive = 0 ] && exit 0
  sleep 0.1
done
for p in slurmrestd slurmd slurmctld; do
  [ -s "$D/$p.pid" ] && kill -9 "$(cat "$D/$p.pid")" 2>/dev/null || true
done
exit 0
