#!/usr/bin/env bash
# The sweep driver's own overhead per trial: everything but the trial
# process's work (planning, claiming, recording, re-planning, spawning).
# Trials are stood in for by tests/support/fake_trial.py; overhead per trial =
# (sweep wall time - sum of trial process wall times) / trials.
# Usage: scripts/bench_driver.sh [build-dir]
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
{ echo 'name = "bench-driver"'; cat tests/support/tiny_cpu_sweep.toml; } > "$dir/bench.toml"
cat >> "$dir/bench.toml" <<TOML
[space]
optimizer = ["adamw", "lion", "adam8bit", "adafactor"]
precision = ["fp32", "bf16-mixed", "fp16-mixed"]
checkpointing = ["none", "full"]
context = [64, 128, 256]
[output]
database = "$dir/bench.db"
TOML
began=$(date +%s.%N)
TUNE_TRIAL_PROGRAM="$PWD/tests/support/fake_trial.py" "$build/tune" sweep "$dir/bench.toml" --json > "$dir/events.jsonl"
ended=$(date +%s.%N)
python3 - "$dir/events.jsonl" "$began" "$ended" <<'PY'
import json, sys
events = [json.loads(line) for line in open(sys.argv[1])]
trials = [e for e in events if e["event"] == "trial_finished"]
total = float(sys.argv[3]) - float(sys.argv[2])  # the whole command: start-up, planning, loop, exit
child = sum(e["wall_s"] for e in trials)
overhead = (total - child) / len(trials)
print(f"trials: {len(trials)}  whole command: {total:.2f} s  trial processes: {child:.2f} s")
print(f"driver overhead per trial: {overhead * 1000:.1f} ms (target <= 50 ms)")
PY
