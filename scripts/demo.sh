#!/usr/bin/env bash
# Installs what tune needs, builds it, and runs the demo sweep end to end on
# the CPU backend: enumerate, estimate, prune, run, record, report. Then the
# Llama-7B sweep, estimate-only on a machine without GPUs.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/install-deps.sh
./scripts/build.sh
mkdir -p out
cd out
# --probe: step time from rates measured here at start (GEMMs per pass, attention, the
# element-wise ops, collectives per call), a few seconds, cached in demo.db.
../build/tune sweep --probe ../sweeps/demo.toml
../build/tune ../sweeps/llama7b.toml
