#!/usr/bin/env bash
# Installs what tune needs, builds it, and runs the main job.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/install-deps.sh
./scripts/build.sh
./build/tune validate sweeps/llama7b.toml
