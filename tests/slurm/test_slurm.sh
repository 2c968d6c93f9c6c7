#!/bin/bash
# The slurm test group: a real one-node Slurm (tests/slurm/cluster.sh) runs
#  1. a sweep inside salloc: every trial an srun job step, two at once on the
#     node's 2 CPUs, statuses recorded;
#  2. a sweep submitted with `tune submit`, requeued (scontrol requeue) while
#     trials run: the requeued job resumes it and every trial is recorded once.
# Job steps are read from `squeue --steps` while the sweeps run (sacct needs
# slurmdbd and a database, which this one-node cluster goes without).
# Exit 4 (skipped, with the reason) where slurm-wlm or munge is absent.
# Usage: test_slurm.sh /path/to/tune
set -u
TUNE=$(realpath "$1")
HERE=$(cd "$(dirname "$0")" && pwd)
source "$HERE/cluster.sh"

if missing=$(slurm_missing); then
    echo "SKIP: $missing is not installed; scripts/install-deps.sh --with-test-extras installs slurm-wlm and munge"
    exit 4
fi
WORK=$(mktemp -d /tmp/tune-slurm-test.XXXXXX)
# Not in $(...): the function exports SLURM_CONF and MUNGE_SOCKET for the commands below.
if ! slurm_cluster_start "$WORK/cluster" >"$WORK/start.log" 2>&1; then
    echo "SKIP: the one-node Slurm cluster did not start: $(tail -3 "$WORK/start.log")"
    tail -5 "$WORK/cluster/log/"*.log 2>/dev/null
    slurm_cluster_stop
    exit 4
fi
trap 'kill $POLLER 2>/dev/null; slurm_cluster_stop' EXIT
FAILED=0
check() {  # check "what" command...
    local what=$1; shift
    if "$@"; then echo "ok: $what"; else echo "FAILED: $what"; FAILED=1; fi
}
began=$(date +%s)

write_sweep() {  # NAME OPTIMIZERS CONTEXTS
    cat >"$WORK/$1.toml" <<TOML
name = "$1"
[model]
preset = "tiny"
[hardware]
device = "cpu"
memory_limit = "1GiB"
[space]
optimizer = [$2]
context = [$3]
[trial]
steps = 3
warmup = 1
timeout = "120s"
[resources]
cpus = "auto"
[output]
database = "$WORK/$1.db"
report = "$WORK/$1.html"
TOML
}

# The job steps squeue shows, sampled: "time stepid name" lines.
poll_steps() {
    while true; do
        squeue --steps -h -o "%i %j" 2>/dev/null | sed "s/^/$(date +%s.%N) /"
        sleep 0.2
    done >>"$WORK/steps.log"
}
poll_steps &
POLLER=$!

# Most trial steps squeue showed at one sample.
max_concurrent_steps() {
    awk '$3 == "tune-trial" { n[$1]++ } END { m = 0; for (t in n) if (n[t] > m) m = n[t]; print m }' "$WORK/steps.log"
}
count_status() {  # DB STATUS
    sqlite3 "$1" "SELECT count(*) FROM trials WHERE status = '$2'"
}

cd "$WORK" || exit 1
# ---- 1. a sweep inside salloc
write_sweep alloc '"adamw", "lion", "adafactor"' '64, 128'
salloc --nodes=1 --exclusive --job-name=tune-alloc "$TUNE" sweep alloc.toml --no-report >"$WORK/alloc.log" 2>&1
check "the sweep in salloc exits 0" test $? -eq 0
cat "$WORK/alloc.log"
check "six trials ok" test "$(count_status alloc.db ok)" -eq 6
check "no trial failed" test "$(count_status alloc.db failed)" -eq 0
steps=$(awk '$3 == "tune-trial"' "$WORK/steps.log" | awk '{print $2}' | sort -u | wc -l)
echo "trial job steps seen: $steps; at most $(max_concurrent_steps) at once"
check "trials ran as job steps" test "$steps" -ge 3
check "two trial steps ran at once" test "$(max_concurrent_steps)" -ge 2
check "off a terminal: one progress line per trial" test "$(grep -c '^\[[0-9]*/6\]' "$WORK/alloc.log")" -eq 6

# ---- 2. tune submit, requeued while trials run, resumes
write_sweep batch '"adamw", "lion", "adafactor", "adam8bit"' '64, 128, 256'
submitted=$("$TUNE" submit batch.toml --time 10m)
echo "$submitted"
job=$(echo "$submitted" | sed -n 's/.* as job \([0-9]*\).*/\1/p')
check "tune submit prints the job id" test -n "$job"
for _ in $(seq 1 240); do
    [ -f batch.db ] && [ "$(count_status batch.db ok)" -ge 2 ] && break
    sleep 0.5
done
"$TUNE" status --db batch.db
check "tune status reads the sweep while the job runs" "$TUNE" status --db batch.db
scontrol requeue "$job"
check "scontrol requeue" test $? -eq 0
# A requeued job waits out a begin time; start it now.
for _ in $(seq 1 20); do
    [ "$(squeue -h -j "$job" -o %T)" = PENDING ] && scontrol update jobid="$job" starttime=now 2>/dev/null && break
    sleep 0.5
done
for _ in $(seq 1 600); do
    [ -z "$(squeue -h -j "$job" -o %T 2>/dev/null)" ] && break
    sleep 0.5
done
cat "$WORK"/tune-batch-*.log
check "the requeued job ran the sweep twice: cut short, then resumed" \
    test "$(grep -c 'trial(s) this time' "$WORK"/tune-batch-*.log)" -ge 2
check "the first run stopped at the requeue's signal" grep -q "interrupted" "$WORK"/tune-batch-*.log
check "all 12 trials ok after the requeue" test "$(count_status batch.db ok)" -eq 12
check "each configuration once" test "$(sqlite3 batch.db 'SELECT count(DISTINCT config_hash) FROM trials')" -eq 12
check "some trial ran again after the requeue" test "$(sqlite3 batch.db 'SELECT count(*) FROM trials WHERE attempts > 1')" -ge 1
"$TUNE" status --db batch.db
echo "slurm test took $(( $(date +%s) - began ))s"
exit $FAILED
