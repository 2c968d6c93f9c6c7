#!/usr/bin/env bash
# Configures and builds tune into ./build (Release, warnings as errors).
# The CUDA backend is built when nvcc is found (TUNE_CUDA=AUTO); pass
# -DTUNE_CUDA=OFF as an argument to skip it.
set -euo pipefail
cd "$(dirname "$0")/.."
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DTUNE_WERROR=ON "$@"
cmake --build build -j"$(nproc)"
