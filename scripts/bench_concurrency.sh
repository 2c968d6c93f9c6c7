#!/usr/bin/env bash
# The demo sweep with 1-rank trials, run 1 at a time and then 2 at a time
# ([resources] cpus = 2), on this machine: wall times, the makespan the plan
# predicted for each, and whether the two runs agree (statuses, measured peaks).
# "sequential" gives each trial both cores (2 OpenMP threads); "sequential-1t"
# one thread, like each of the concurrent trials, so only the packing differs
# (the attention workspace scales with the thread count, hence peaks and OOMs).
# Usage: scripts/bench_concurrency.sh [build/tune] [names...]
set -euo pipefail
TUNE=$(realpath "${1:-build/tune}")
ROOT=$(cd "$(dirname "$0")/.." && pwd)
WORK=$(mktemp -d /tmp/tune-bench-concurrency.XXXXXX)
cd "$WORK"
one_rank() {  # NAME [RESOURCES]
    sed -e 's/^gpus = 2/gpus = 1/' -e "s/^name = .*/name = \"$1\"/" -e "s/^database = .*/database = \"$1.db\"/" \
        -e "s/^report = .*/report = \"$1.html\"/" -e 's/^budget = .*/budget = "30m"/' "$ROOT/sweeps/demo.toml" >"$1.toml"
    if [ -n "${2:-}" ]; then printf '\n[resources]\n%s\n' "$2" >>"$1.toml"; fi
}
one_rank sequential
one_rank sequential-1t
one_rank concurrent 'cpus = 2'
shift || true
names=("$@")
[ ${#names[@]} -gt 0 ] || names=(sequential sequential-1t concurrent)
for name in "${names[@]}"; do
    threads=()
    [ "$name" = sequential-1t ] && threads=(env OMP_NUM_THREADS=1)
    "${threads[@]+"${threads[@]}"}" "$TUNE" sweep "$name.toml" --plan-only | sed "s/^/$name plan: /"
    start=$(date +%s.%N)
    "${threads[@]+"${threads[@]}"}" "$TUNE" sweep "$name.toml" --no-report >"$name.log" 2>&1
    end=$(date +%s.%N)
    echo "$name: wall $(echo "$end - $start" | bc) s"
    "$TUNE" report --format text --db "$name.db" 2>/dev/null | grep '^makespan' | sed "s/^/$name /" || true
done
q="SELECT optimizer, precision, zero_stage, grad_accum, checkpointing, context, status, peak_bytes FROM trials ORDER BY 1,2,3,4,5,6"
for name in "${names[@]}"; do
    [ "$name" = concurrent ] && continue
    if diff <(sqlite3 "$name.db" "$q") <(sqlite3 concurrent.db "$q") >"diff-$name.txt"; then
        echo "$name vs concurrent: statuses and measured peaks identical ($(sqlite3 "$name.db" 'SELECT count(*) FROM trials') trials)"
    else
        echo "$name vs concurrent: statuses or peaks differ in $(grep -c '^<' "diff-$name.txt") trial(s) (diff-$name.txt)"
    fi
done
for name in "${names[@]}"; do
    echo "$name: $(sqlite3 "$name.db" "SELECT group_concat(status || ' ' || n, ', ') FROM (SELECT status, count(*) n FROM trials GROUP BY status)")"
done
echo "work directory: $WORK"
