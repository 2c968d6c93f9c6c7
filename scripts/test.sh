#!/usr/bin/env bash
# Installs what the tests need, builds, and runs every test (ctest).
# Labels: mpi (multi-rank, under mpirun), browser (headless Chromium),
# gpu (skipped, visibly, on machines without a CUDA device), cuda-emu (the CUDA
# backend on an emulated device), fuzz (mutated inputs through tune), format
# (every C++/CUDA file follows .clang-format).
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/install-deps.sh --with-test-extras
./scripts/build.sh
ctest --test-dir build -j"$(nproc)" --output-on-failure
