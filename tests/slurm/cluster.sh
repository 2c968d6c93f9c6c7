# A one-node Slurm cluster for the tests (sourced by tests/slurm/test_slurm.sh):
# munged, slurmctld and slurmd from Debian's slurm-wlm, CPU-only (GRES GPUs
# need device files this machine lacks), 2 CPUs, everything under $SLURM_DIR,
# on ports of its own so a real Slurm on the machine is left alone.
#   slurm_cluster_start DIR   # exports SLURM_CONF; returns 4 with the reason when it cannot start
#   slurm_cluster_stop

slurm_missing() {
    local tool
    for tool in munged slurmctld slurmd sbatch srun salloc scontrol squeue; do
        command -v "$tool" >/dev/null 2>&1 || { echo "$tool"; return 0; }
    done
    return 1
}

slurm_cluster_start() {
    SLURM_DIR=$1
    mkdir -p "$SLURM_DIR"/{state,spool,munge,log}
    local host
    host=$(hostname -s)
    # munge: a key of our own and a socket in our directory.
    dd if=/dev/urandom of="$SLURM_DIR/munge/munge.key" bs=1024 count=1 status=none
    chmod 700 "$SLURM_DIR/munge"
    chmod 400 "$SLURM_DIR/munge/munge.key"
    export MUNGE_SOCKET="$SLURM_DIR/munge/munge.socket"
    munged --force --key-file="$SLURM_DIR/munge/munge.key" --socket="$MUNGE_SOCKET" \
        --pid-file="$SLURM_DIR/munge/munged.pid" --log-file="$SLURM_DIR/log/munged.log" \
        --seed-file="$SLURM_DIR/munge/seed" || return 4
    cat >"$SLURM_DIR/slurm.conf" <<CONF
ClusterName=tunetest
SlurmctldHost=$host(127.0.0.1)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=$MUNGE_SOCKET
CredType=cred/munge
SlurmctldPort=26817
SlurmdPort=26818
StateSaveLocation=$SLURM_DIR/state
SlurmdSpoolDir=$SLURM_DIR/spool
SlurmctldPidFile=$SLURM_DIR/slurmctld.pid
SlurmdPidFile=$SLURM_DIR/slurmd.pid
SlurmctldLogFile=$SLURM_DIR/log/slurmctld.log
SlurmdLogFile=$SLURM_DIR/log/slurmd.log
SlurmctldDebug=${SLURMCTLD_DEBUG:-verbose}
SlurmdDebug=info
ProctrackType=proctrack/pgid
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SlurmdParameters=config_overrides
ReturnToService=2
MpiDefault=none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SchedulerType=sched/builtin
KillWait=5
MinJobAge=3600
NodeName=$host NodeAddr=127.0.0.1 CPUs=2 Sockets=1 CoresPerSocket=2 ThreadsPerCore=1 RealMemory=1000 State=UNKNOWN
PartitionName=debug Nodes=$host Default=YES MaxTime=INFINITE State=UP
CONF
    export SLURM_CONF="$SLURM_DIR/slurm.conf"
    slurmctld -c -f "$SLURM_CONF" || return 4
    slurmd -f "$SLURM_CONF" || return 4
    local i
    for i in $(seq 1 60); do
        if sinfo -h -o '%T' 2>/dev/null | grep -q idle; then return 0; fi
        scontrol update nodename="$host" state=resume >/dev/null 2>&1
        sleep 1
    done
    echo "the node did not become idle: $(sinfo 2>&1 | tail -2)"
    return 4
}

slurm_cluster_stop() {
    local f
    for f in "$SLURM_DIR/slurmd.pid" "$SLURM_DIR/slurmctld.pid" "$SLURM_DIR/munge/munged.pid"; do
        [ -f "$f" ] && kill "$(cat "$f")" 2>/dev/null
    done
    sleep 1
}
