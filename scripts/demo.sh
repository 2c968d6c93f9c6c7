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
../build/tune ../sweeps/demo.toml
../build/tune ../sweeps/llama7b.toml
