#!/bin/bash
# slurm-up.sh DIR: a single-node Slurm (slurmctld + slurmd + munge) in DIR,
# for tests: no systemd, no cgroups, no accounting. Writes DIR/slurm.conf
# and DIR/env (SLURM_CONF=...); stop it with slurm-down.sh DIR.
# The node offers this machine's CPUs and 2000 MB; partition `debug`.
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
NodeName=localhost CPUs=$cpus RealMemory=2000 State=UNKNOWN
PartitionName=debug Nodes=localhost Default=YES MaxTime=INFINITE State=UP
CONF
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
for _ in $(seq 1 300); do
  [ "$(sinfo -h -N -o %t 2>/dev/null || true)" = idle ] && exit 0
  sleep 0.1
done
echo "slurm-up.sh: the node did not become idle; logs in $D" >&2
exit 1
