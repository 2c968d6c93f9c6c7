#!/bin/bash
# The slurm test group: a real one-node Slurm with accounting (tests/slurm/cluster.sh)
#  1. runs a sweep inside salloc: statuses recorded; from sacct, every trial an
#     srun job step named for its configuration, two of them at once on the
#     node's 2 CPUs; the report sets the predicted makespan beside the real one;
#  2. runs a GPU sweep (a stand-in trial program: this build has no GPU backend
#     to train with) on the node's 2 GRES GPUs: each step asks Slurm for its GPU,
#     sacct accounts it (AllocTRES gres/gpu=1) and concurrent steps see
#     different CUDA_VISIBLE_DEVICES;
#  3. submits a sweep with `tune submit`, requeues it (scontrol requeue) while
#     trials run: the requeued job resumes it, and sacct shows every configuration
#     completed as a step exactly once over both runs (none lost, none twice);
#  4. submits a sweep longer than its one-minute time limit: Slurm's SIGINT
#     before the limit (`--signal=B:INT@`) stops it starting trials, the running
#     ones finish, and the job ends by itself before the limit.
# Exit 4 (skipped, with the reason) where slurm-wlm, slurmdbd, MariaDB or munge is absent.
# Usage: test_slurm.sh /path/to/tune
set -u
TUNE=$(realpath "$1")
HERE=$(cd "$(dirname "$0")" && pwd)
SOURCE_DIR=$(cd "$HERE/../.." && pwd)
source "$HERE/cluster.sh"

if missing=$(slurm_missing); then
    echo "SKIP: $missing is not installed; scripts/install-deps.sh --with-test-extras installs slurm-wlm, slurmdbd, mariadb-server and munge"
    exit 4
fi
WORK=$(mktemp -d /tmp/tune-slurm-test.XXXXXX)
began=$(date +%s)
# Not in $(...): the function exports SLURM_CONF and MUNGE_SOCKET for the commands below.
if ! slurm_cluster_start "$WORK/cluster" >"$WORK/start.log" 2>&1; then
    echo "SKIP: the one-node Slurm cluster did not start: $(tail -3 "$WORK/start.log")"
    tail -5 "$WORK/cluster/log/"*.log 2>/dev/null
    slurm_cluster_stop
    rm -rf "$WORK"
    exit 4
fi
echo "cluster up in $(( $(date +%s) - began ))s"
trap 'slurm_cluster_stop; [ "$FAILED" = 0 ] && rm -rf "$WORK"' EXIT
FAILED=0
check() {  # check "what" command...
    local what=$1; shift
    if "$@"; then echo "ok: $what"; else echo "FAILED: $what"; FAILED=1; fi
}

write_sweep() {  # NAME DEVICE OPTIMIZERS CONTEXTS [RESOURCES LINE]
    local resources=${5:-'cpus = "auto"'}
    cat >"$WORK/$1.toml" <<TOML
name = "$1"
[model]
preset = "tiny"
[hardware]
device = "$2"
memory_limit = "1GiB"
[space]
optimizer = [$3]
context = [$4]
[trial]
steps = ${STEPS:-10}
warmup = 1
timeout = "60s"
[resources]
$resources
[output]
database = "$WORK/$1.db"
report = "$WORK/$1.html"
TOML
}

count_status() {  # DB STATUS
    sqlite3 "$1" "SELECT count(*) FROM trials WHERE status = '$2'"
}

# The job's trial steps from accounting, "id|name|start|end|state|alloctres" lines, every run of a
# requeued job (-D). Waits until the job has ended and slurmctld has sent slurmdbd its last step.
trial_steps() {  # JOB
    local i out
    for i in $(seq 1 60); do
        out=$(sacct -D -j "$1" --format=JobID,JobName,Start,End,State,AllocTRES -P -n 2>/dev/null)
        if [ -n "$out" ] && ! grep -q 'Unknown\|RUNNING\|PENDING' <<<"$out"; then break; fi
        sleep 0.5
    done
    grep '|tune-trial-' <<<"$out"
}

# Most steps running at one moment: Start/End are ISO times, which order as strings; two steps
# overlap when each starts before the other ends (equal seconds do not count).
max_overlap() {  # steps from trial_steps
    awk -F'|' '{ s[NR] = $3; e[NR] = $4 }
        END { m = 0; for (i = 1; i <= NR; i++) { n = 0
                  for (j = 1; j <= NR; j++) if (s[j] <= s[i] && s[i] < e[j]) n++
                  if (n > m) m = n }
              print m }'
}

# The job's final State|Elapsed from sacct. squeue forgets a job before slurmdbd has recorded its
# end, so sacct may still say RUNNING (or nothing) for a moment after wait_job_gone.
job_final_state() {  # JOB
    local state
    for _ in $(seq 1 60); do
        state=$(sacct -n -X -P -j "$1" --format=State,Elapsed 2>/dev/null | tail -1)
        [ -n "$state" ] && ! grep -q '^\(RUNNING\|PENDING\|COMPLETING\|REQUEUED\)' <<<"$state" && break
        sleep 0.5
    done
    echo "$state"
}

wait_job_gone() {  # JOB
    for _ in $(seq 1 600); do
        [ -z "$(squeue -h -j "$1" -o %T 2>/dev/null)" ] && return 0
        sleep 0.5
    done
    return 1
}

cd "$WORK" || exit 1
# ---- 1. a sweep inside salloc
# Longer trials (a few seconds each) so that two at once overlap in sacct's whole seconds: at 20
# steps a trial took under a second on the CI VM of 2026-11-26, and the overlap check below failed.
STEPS=200 write_sweep alloc cpu '"adamw", "lion", "adafactor"' '128, 256'
salloc --nodes=1 --exclusive --job-name=tune-alloc "$TUNE" sweep alloc.toml --no-probe --no-report >"$WORK/alloc.log" 2>&1
check "the sweep in salloc exits 0" test $? -eq 0
cat "$WORK/alloc.log"
check "six trials ok" test "$(count_status alloc.db ok)" -eq 6
check "no trial failed" test "$(count_status alloc.db failed)" -eq 0
check "off a terminal: one progress line per trial" test "$(grep -c '^\[[0-9]*/6\]' "$WORK/alloc.log")" -eq 6
alloc_job=$(sed -n 's/^salloc: Granted job allocation \([0-9]*\).*/\1/p' "$WORK/alloc.log")
trial_steps "$alloc_job" >"$WORK/alloc.steps"
cat "$WORK/alloc.steps"
check "sacct: six trial job steps, all completed" test "$(grep -c '|COMPLETED|' "$WORK/alloc.steps")" -eq 6
check "sacct: the steps are the six configurations the store holds" \
    test "$(cut -d'|' -f2 "$WORK/alloc.steps" | sed 's/^tune-trial-//' | sort -u)" = \
         "$(sqlite3 alloc.db 'SELECT config_hash FROM trials ORDER BY config_hash')"
echo "trial steps running at once (sacct): at most $(max_overlap <"$WORK/alloc.steps")"
check "sacct: two trial steps ran at once" test "$(max_overlap <"$WORK/alloc.steps")" -ge 2
makespan=$("$TUNE" report --db alloc.db --format text | grep '^makespan')
echo "$makespan"
check "the report sets the predicted makespan beside the real one" grep -q 'predicted .*, real .*%' <<<"$makespan"

# ---- 2. GPUs as GRES: each 1-GPU trial step asks for and is accounted one GPU
write_sweep gres h100-80gb '"adamw", "lion", "adafactor", "adam8bit"' '64' 'gpus_per_node = 2'
sed -i 's/^memory_limit = .*/memory_limit = "8GiB"/' gres.toml  # room for the CUDA context the estimate counts
# TUNE_TEST_GPUS: the driver, built without CUDA here, hands out the two GRES GPUs to the stand-in.
FAKE_TRIAL_SLEEP=2 FAKE_TRIAL_LOG="$WORK/gres.placed" TUNE_TRIAL_PROGRAM="$SOURCE_DIR/tests/support/fake_trial.py" \
    TUNE_TEST_GPUS=2 \
    salloc --nodes=1 --exclusive --job-name=tune-gres "$TUNE" sweep gres.toml --no-probe --no-report >"$WORK/gres.log" 2>&1
check "the GPU sweep in salloc exits 0" test $? -eq 0
cat "$WORK/gres.log"
check "four GPU trials ok" test "$(count_status gres.db ok)" -eq 4
gres_job=$(sed -n 's/^salloc: Granted job allocation \([0-9]*\).*/\1/p' "$WORK/gres.log")
trial_steps "$gres_job" >"$WORK/gres.steps"
cat "$WORK/gres.steps"
check "sacct: every GPU trial step was allocated one GPU" \
    test "$(grep -c '|COMPLETED|.*gres/gpu=1' "$WORK/gres.steps")" -eq 4
check "sacct: two GPU trial steps ran at once" test "$(max_overlap <"$WORK/gres.steps")" -ge 2
cat "$WORK/gres.placed"
check "each trial saw one GPU of the two through CUDA_VISIBLE_DEVICES" \
    test "$(grep -c '"gpus": "[01]"' "$WORK/gres.placed")" -eq 4
check "both GPUs were used" test "$(grep -o '"gpus": "[01]"' "$WORK/gres.placed" | sort -u | wc -l)" -eq 2

# ---- 3. tune submit, requeued while trials run, resumes
STEPS=30 write_sweep batch cpu '"adamw", "lion", "adafactor", "adam8bit"' '64, 128, 256'
submitted=$("$TUNE" submit batch.toml --time 10m --no-probe)
echo "$submitted"
job=$(echo "$submitted" | sed -n 's/.* as job \([0-9]*\).*/\1/p')
check "tune submit prints the job id" test -n "$job"
for _ in $(seq 1 240); do
    [ -f batch.db ] && [ "$(count_status batch.db ok 2>/dev/null || echo 0)" -ge 2 ] && break
    sleep 0.5
done
check "tune status reads the sweep while the job runs" "$TUNE" status --db batch.db
scontrol requeue "$job"
check "scontrol requeue" test $? -eq 0
# A requeued job waits out a begin time; start it sooner. Not at once: slurmd revokes the first
# run's job credential, with one-second resolution, and refuses a credential issued within that
# second ("Killing non-startable batch JobId: Job credential revoked"), so wait for the node to be
# idle again and two seconds more.
for _ in $(seq 1 40); do
    [ "$(squeue -h -j "$job" -o %T)" = PENDING ] && [ "$(sinfo -h -o %T | head -1)" = idle ] && break
    sleep 0.5
done
sleep 2
scontrol update jobid="$job" starttime=now
wait_job_gone "$job"
cat "$WORK"/tune-batch-*.log
check "the requeued job ran the sweep twice: cut short, then resumed" \
    test "$(grep -c 'trial(s) this time' "$WORK"/tune-batch-*.log)" -ge 2
check "the first run stopped at the requeue's signal" grep -q "interrupted" "$WORK"/tune-batch-*.log
check "all 12 trials ok after the requeue" test "$(count_status batch.db ok)" -eq 12
check "each configuration once in the store" \
    test "$(sqlite3 batch.db 'SELECT count(DISTINCT config_hash) FROM trials')" -eq 12
# A trial the requeue cut short runs again (sacct shows the cut step below) without the attempt its
# first claim counted: attempts count drivers that died under a trial, not interruptions.
check "no trial counts the requeue against its attempts" \
    test "$(sqlite3 batch.db 'SELECT count(*) FROM trials WHERE attempts > 1')" -eq 0
trial_steps "$job" >"$WORK/batch.steps"
cat "$WORK/batch.steps"
completed=$(grep '|COMPLETED|' "$WORK/batch.steps" | cut -d'|' -f2 | sed 's/^tune-trial-//' | sort)
check "sacct over both runs: each configuration completed as a step exactly once (none lost, none twice)" \
    test "$completed" = "$(sqlite3 batch.db 'SELECT config_hash FROM trials ORDER BY config_hash')"
check "sacct: the requeue cut a running step short" test "$(grep -vc '|COMPLETED|' "$WORK/batch.steps")" -ge 1
"$TUNE" status --db batch.db

# ---- 4. the time limit's signal, for real: a one-minute job whose trials would take longer. The
# script asks for SIGINT when the time left is under the trial timeout + 60 s (here from the start;
# slurmctld sends it at its next time-limit check, within 30 s); tune starts no more trials, lets the
# running ones finish and ends the job before the limit would. Stand-in trials of 3 s each, 40 of
# them, 2 at a time: a minute of work.
check "the batch script asks for SIGINT before the time limit" \
    grep -q '^#SBATCH --signal=B:INT@' <("$TUNE" submit batch.toml --time 10m --dry-run)
write_sweep late cpu '"adamw", "lion", "adafactor", "adam8bit", "lomo"' '32, 64, 128, 256'
sed -i -e 's/^\[space\]/[space]\nprecision = ["fp32", "bf16-mixed"]/' -e 's/^timeout = .*/timeout = "10s"/' late.toml
late=$(FAKE_TRIAL_SLEEP=3 TUNE_TRIAL_PROGRAM="$SOURCE_DIR/tests/support/fake_trial.py" \
    "$TUNE" submit late.toml --time 1m --no-probe | sed -n 's/.* as job \([0-9]*\).*/\1/p')
wait_job_gone "$late"
cat "$WORK"/tune-late-*.log
late_state=$(job_final_state "$late")
echo "the job: $late_state"
check "the sweep heard the signal, stopped starting trials and said so" grep -q "interrupted" "$WORK"/tune-late-*.log
check "it stopped before the end of the sweep" test "$(count_status late.db pending)" -gt 0
check "no trial was cut short or failed" \
    test "$(sqlite3 late.db "SELECT count(*) FROM trials WHERE status NOT IN ('ok', 'pending')")" -eq 0
check "sacct: the job ended by itself before its time limit (not TIMEOUT)" \
    test "$(cut -d'|' -f1 <<<"$late_state")" = FAILED  # tune's exit status 130: interrupted
trial_steps "$late" >"$WORK/late.steps"
check "sacct: the steps running at the signal finished (every trial step completed)" \
    test "$(grep -c '|COMPLETED|' "$WORK/late.steps")" -eq "$(wc -l <"$WORK/late.steps")"

echo "slurm test took $(( $(date +%s) - began ))s"
[ "$FAILED" = 0 ] || echo "kept for a look: $WORK"
exit $FAILED
