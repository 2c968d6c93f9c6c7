# A one-node Slurm cluster for the tests (sourced by tests/slurm/test_slurm.sh):
# munged, a MariaDB of its own, slurmdbd, slurmctld and slurmd from Debian's
# packages, 2 CPUs and 2 stand-in GPUs as GRES (device files that are
# /dev/null: Slurm schedules and accounts them), everything under $SLURM_DIR,
# on ports of its own so a real Slurm or MariaDB on the machine is left alone.
# Accounting (slurmdbd) is what lets sacct show the job steps afterwards.
#   slurm_cluster_start DIR   # exports SLURM_CONF; returns 4 with the reason when it cannot start
#   slurm_cluster_stop

SLURM_TEST_PORTS=(26817 26818 26819 26820)  # slurmctld, slurmd, slurmdbd, MariaDB

slurm_missing() {
    local tool
    for tool in munged slurmctld slurmd slurmdbd sbatch srun salloc scontrol squeue sacct sacctmgr \
                mariadbd mariadb mariadb-install-db; do
        command -v "$tool" >/dev/null 2>&1 || { echo "$tool"; return 0; }
    done
    return 1
}

# MariaDB: small, unsynced (a throwaway database), TCP on 127.0.0.1 only.
mariadb_options() {
    echo --no-defaults --datadir="$SLURM_DIR/db" --user=root --innodb-log-file-size=4M \
        --innodb-buffer-pool-size=32M --innodb-flush-log-at-trx-commit=0 --innodb-doublewrite=0 --skip-log-bin
}

mariadb_start() {
    # shellcheck disable=SC2046
    mariadb-install-db $(mariadb_options) --auth-root-authentication-method=normal --skip-test-db \
        >"$SLURM_DIR/log/mariadb-install.log" 2>&1 || return 4
    # shellcheck disable=SC2046
    mariadbd $(mariadb_options) --socket="$SLURM_DIR/mariadb.sock" --port=${SLURM_TEST_PORTS[3]} \
        --bind-address=127.0.0.1 --skip-name-resolve --pid-file="$SLURM_DIR/mariadb.pid" \
        --log-error="$SLURM_DIR/log/mariadb.log" &
    local i
    for i in $(seq 1 100); do
        if mariadb --no-defaults -S "$SLURM_DIR/mariadb.sock" -uroot -e \
            "CREATE USER 'slurm'@'127.0.0.1' IDENTIFIED BY 'tune'; GRANT ALL ON *.* TO 'slurm'@'127.0.0.1'" \
            2>/dev/null; then return 0; fi
        sleep 0.2
    done
    echo "MariaDB did not start: $(tail -3 "$SLURM_DIR/log/mariadb.log")"
    return 4
}

slurmdbd_start() {
    local host=$1
    cat >"$SLURM_DIR/slurmdbd.conf" <<CONF
AuthType=auth/munge
AuthInfo=socket=$MUNGE_SOCKET
DbdHost=$host
DbdAddr=127.0.0.1
DbdPort=${SLURM_TEST_PORTS[2]}
SlurmUser=root
PidFile=$SLURM_DIR/slurmdbd.pid
LogFile=$SLURM_DIR/log/slurmdbd.log
DebugLevel=info
StorageType=accounting_storage/mysql
StorageHost=127.0.0.1
StoragePort=${SLURM_TEST_PORTS[3]}
StorageUser=slurm
StoragePass=tune
StorageLoc=slurm_acct_db
CONF
    chmod 600 "$SLURM_DIR/slurmdbd.conf"
    # slurmdbd reads slurmdbd.conf beside $SLURM_CONF.
    slurmdbd || return 4
    local i
    for i in $(seq 1 30); do
        # The cluster must be registered before slurmctld starts, or it is not accounted.
        if sacctmgr -i add cluster tunetest >/dev/null 2>&1; then
            sacctmgr -i add account tune cluster=tunetest >/dev/null 2>&1
            sacctmgr -i add user root account=tune cluster=tunetest >/dev/null 2>&1
            return 0
        fi
        sleep 0.2
    done
    echo "slurmdbd did not answer: $(tail -3 "$SLURM_DIR/log/slurmdbd.log")"
    return 4
}

slurm_cluster_start() {
    SLURM_DIR=$1
    mkdir -p "$SLURM_DIR"/{state,spool,munge,log,db}
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
    # Two stand-in GPUs: slurmd drops a gpu GRES without File= ("file-less GPU"), so each is a
    # character device with /dev/null's numbers (a plain file where mknod is not allowed: slurmd
    # logs an error and counts it all the same). Steps that ask for GPUs are scheduled on them,
    # get CUDA_VISIBLE_DEVICES, and are accounted as gres/gpu; nothing opens them.
    mkdir -p "$SLURM_DIR/dev"
    local g
    for g in 0 1; do
        mknod "$SLURM_DIR/dev/nvidia$g" c 1 3 2>/dev/null || : >"$SLURM_DIR/dev/nvidia$g"
    done
    echo "Name=gpu File=$SLURM_DIR/dev/nvidia[0-1]" >"$SLURM_DIR/gres.conf"
    cat >"$SLURM_DIR/slurm.conf" <<CONF
ClusterName=tunetest
SlurmctldHost=$host(127.0.0.1)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=$MUNGE_SOCKET
CredType=cred/munge
SlurmctldPort=${SLURM_TEST_PORTS[0]}
SlurmdPort=${SLURM_TEST_PORTS[1]}
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
GresTypes=gpu
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=127.0.0.1
AccountingStoragePort=${SLURM_TEST_PORTS[2]}
AccountingStorageTRES=gres/gpu
# Clients authenticate to slurmdbd through this munge socket (AuthInfo is not used for it).
AccountingStoragePass=$MUNGE_SOCKET
JobCompType=jobcomp/none
SchedulerType=sched/builtin
KillWait=5
MinJobAge=3600
NodeName=$host NodeAddr=127.0.0.1 CPUs=2 Sockets=1 CoresPerSocket=2 ThreadsPerCore=1 RealMemory=1000 Gres=gpu:2 State=UNKNOWN
PartitionName=debug Nodes=$host Default=YES MaxTime=INFINITE State=UP
CONF
    export SLURM_CONF="$SLURM_DIR/slurm.conf"
    mariadb_start || return 4
    slurmdbd_start "$host" || return 4
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
    local f pid i
    # In this order, each gone before the next: slurmctld and slurmdbd flush to what follows them.
    for f in "$SLURM_DIR/slurmd.pid" "$SLURM_DIR/slurmctld.pid" "$SLURM_DIR/slurmdbd.pid" \
             "$SLURM_DIR/mariadb.pid" "$SLURM_DIR/munge/munged.pid"; do
        pid=$(cat "$f" 2>/dev/null) || continue
        kill "$pid" 2>/dev/null || continue
        for i in $(seq 1 50); do
            kill -0 "$pid" 2>/dev/null || break
            sleep 0.1
        done
    done
}
