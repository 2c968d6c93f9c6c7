#!/usr/bin/env bash
# Installs what tune needs, builds it, and runs the demo sweep end to end on
# the CPU backend: enumerate, estimate, prune, run, record, report. Then the
# Llama-7B sweep, estimate-only on a machine without GPUs.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/install-deps.sh
./scripts/build.sh
# A sweep that runs trials first probes its step-time rates here (GEMMs per pass,
# attention, the element-wise ops, collectives per call): a few seconds, cached
# in demo.db. Each sweep writes its database and report beside its file (sweeps/).
build/tune sweep sweeps/demo.toml
build/tune sweeps/llama7b.toml
