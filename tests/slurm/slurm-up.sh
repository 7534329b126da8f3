#!/bin/bash
# slurm-up.sh DIR: a single-node Slurm (slurmctld + slurmd + munge) in DIR,
# for tests: no systemd, no cgroups, no accounting. Writes DIR/slurm.conf
# and DIR/env (SLURM_CONF=...); stop it with slurm-down.sh DIR.
# The node offers this machine's CPUs, 2000 MB and two GPUs of type h100
# whose device files are empty files in DIR (no GPU is behind them), so
# jobs that ask for --gres=gpu:h100:N are scheduled as on a GPU node;
# partition `debug`.
# With BURST_SLURM_REST_PORT=P, also slurmrestd on 127.0.0.1:P with JWT
# authentication (AuthAltTypes=auth/jwt, a key in DIR/jwt.key; slurmrestd
# runs as nobody, as it refuses to run as root), and DIR/env gains
# SLURM_JWT (a token, a day long, for BURST_SLURM_REST_USER, default root:
# jobs submitted with it run as that user), BURST_TEST_SLURM_REST (its URL)
# and BURST_TEST_SLURM_REST_USER.
set -euo pipefail
D=$(realpath "$1")
mkdir -p "$D/state" "$D/spool"
cpus=$(nproc)
cat > "$D/slurm.conf" <<CONF
ClusterName=burst
SlurmctldHost=localhost
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
SlurmctldPort=${BURST_SLURMCTLD_PORT:-6817}
SlurmdPort=${BURST_SLURMD_PORT:-6818}
StateSaveLocation=$D/state
SlurmdSpoolDir=$D/spool
SlurmctldPidFile=$D/slurmctld.pid
SlurmdPidFile=$D/slurmd.pid
SlurmctldLogFile=$D/slurmctld.log
SlurmdLogFile=$D/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SchedulerType=sched/backfill
SchedulerParameters=sched_min_interval=0,batch_sched_delay=0,bf_interval=1
MpiDefault=none
ReturnToService=2
SlurmctldTimeout=30
SlurmdTimeout=30
InactiveLimit=0
MinJobAge=300
KillWait=5
Waittime=0
GresTypes=gpu
NodeName=localhost CPUs=$cpus RealMemory=2000 Gres=gpu:h100:2 State=UNKNOWN
PartitionName=debug Nodes=localhost Default=YES MaxTime=INFINITE State=UP
CONF
touch "$D/nvidia0" "$D/nvidia1"
echo "Name=gpu Type=h100 File=$D/nvidia[0-1]" > "$D/gres.conf"
if [ -n "${BURST_SLURM_REST_PORT:-}" ]; then
  head -c 32 /dev/urandom > "$D/jwt.key"
  chmod 0600 "$D/jwt.key"
  printf 'AuthAltTypes=auth/jwt\nAuthAltParameters=jwt_key=%s\n' "$D/jwt.key" >> "$D/slurm.conf"
fi
echo "SLURM_CONF=$D/slurm.conf" > "$D/env"
export SLURM_CONF=$D/slurm.conf
# munged runs as munge and refuses root; one per machine is enough.
if ! munge -n >/dev/null 2>&1; then
  install -d -o munge -g munge -m 0755 /run/munge
  if [ ! -s /etc/munge/munge.key ]; then
    mungekey --create --force
    chown munge:munge /etc/munge/munge.key
  fi
  runuser -u munge -- munged
fi
slurmctld -f "$D/slurm.conf"
slurmd -f "$D/slurm.conf" -N localhost
idle=0
for _ in $(seq 1 300); do
  [ "$(sinfo -h -N -o %t 2>/dev/null || true)" = idle ] && { idle=1; break; }
  sleep 0.1
done
if [ $idle = 0 ]; then
  echo "slurm-up.sh: the node did not become idle; logs in $D" >&2
  exit 1
fi
[ -z "${BURST_SLURM_REST_PORT:-}" ] && exit 0
# slurmrestd (as nobody) reads a copy of slurm.conf where nobody can reach
# it (DIR may sit in a folder only root can enter), and nothing else.
rest_conf=$(mktemp /tmp/burst-slurmrestd-XXXXXX.conf)
cp "$D/slurm.conf" "$rest_conf"
chmod 0644 "$rest_conf"
echo "$rest_conf" > "$D/slurmrestd.conf-path"
# SLURM_JWT=daemon: slurmrestd passes each request's token on to slurmctld.
runuser -u nobody -- env SLURM_CONF="$rest_conf" SLURM_JWT=daemon slurmrestd -a rest_auth/jwt -s openapi/v0.0.38 \
  "127.0.0.1:$BURST_SLURM_REST_PORT" > "$D/slurmrestd.log" 2>&1 &
echo $! > "$D/slurmrestd.pid"
rest_user=${BURST_SLURM_REST_USER:-root}
token=$(scontrol token "username=$rest_user" lifespan=86400 | sed -n 's/^SLURM_JWT=//p')
if [ -z "$token" ]; then
  echo "slurm-up.sh: scontrol token gave no JWT (is slurm-wlm-jwt-plugin installed?)" >&2
  exit 1
fi
echo "SLURM_JWT=$token" >> "$D/env"
echo "BURST_TEST_SLURM_REST=http://127.0.0.1:$BURST_SLURM_REST_PORT" >> "$D/env"
echo "BURST_TEST_SLURM_REST_USER=$rest_user" >> "$D/env"
for _ in $(seq 1 100); do
  curl -sf -H "X-SLURM-USER-NAME: $rest_user" -H "X-SLURM-USER-TOKEN: $token" \
    "http://127.0.0.1:$BURST_SLURM_REST_PORT/slurm/v0.0.38/ping" > /dev/null && exit 0
  sleep 0.1
done
echo "slurm-up.sh: slurmrestd did not answer on 127.0.0.1:$BURST_SLURM_REST_PORT; log in $D/slurmrestd.log" >&2
exit 1
