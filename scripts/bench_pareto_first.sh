#!/usr/bin/env bash
# How early pareto-first ordering measures the whole front: runs a sweep to the
# end (no budget) and reports after how many of the run trials the last member
# of the final measured front had been run. Target for the demo: at most half.
# Usage: scripts/bench_pareto_first.sh [build-dir] [sweep-file]
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
sweep=${2:-sweeps/demo.toml}
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
# Same sweep, no budget, its own database.
sed -e '/^budget/d' "$sweep" > "$dir/sweep.toml"
"$build/tune" sweep "$dir/sweep.toml" --db "$dir/run.db" --no-report > /dev/null
"$build/tune" export --db "$dir/run.db" --format json > "$dir/trials.json"
python3 - "$dir/trials.json" <<'PY'
import json, sys
trials = json.load(open(sys.argv[1]))["trials"]
run = sorted((t for t in trials if t["started_at"]), key=lambda t: t["started_at"])
ok = [t for t in run if t["status"] == "ok"]
def dominated(a):
    pa, ta = a["measured"]["peak_bytes"], a["measured"]["tokens_per_s"]
    return any(b["measured"]["peak_bytes"] <= pa and b["measured"]["tokens_per_s"] >= ta and
               (b["measured"]["peak_bytes"] < pa or b["measured"]["tokens_per_s"] > ta) for b in ok)
front = {t["id"] for t in ok if not dominated(t)}
last = max(i for i, t in enumerate(run) if t["id"] in front) + 1
print(f"survivors run: {len(run)}  front: {len(front)} configurations")
print(f"whole front measured after {last} of {len(run)} trials ({100 * last / len(run):.0f}%; target <= 50%)")
PY
