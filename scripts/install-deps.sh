#!/usr/bin/env bash
# Installs everything tune needs to build and test, from Debian 12 packages only.
# Idempotent: re-running it installs nothing new. Needs root (apt-get).
set -euo pipefail

packages=(
  build-essential cmake ninja-build pkg-config git
  libtomlplusplus-dev libsqlite3-dev sqlite3
  catch2 libbenchmark-dev
  libopenblas-dev libomp-dev
  openmpi-bin libopenmpi-dev
  nlohmann-json3-dev libcli11-dev libfmt-dev
  libjs-chart.js
)
# The browser test, the HTML parser check of the reports (xmllint), the
# PyTorch reference and the exports' schema check (PyYAML, as accelerate reads
# its config) are optional extras for the test command;
# `--with-test-extras` adds them. The slurm group (tests/slurm) starts a
# one-node cluster from slurm-wlm and munge, with slurmdbd on a MariaDB of its
# own so the test reads job steps from sacct.
extras=(chromium libxml2-utils python3 python3-torch python3-numpy python3-yaml)
# The format check of every C++/CUDA file (scripts/check-format.sh).
extras+=(clang-format)
extras+=(slurm-wlm munge)
extras+=(slurmdbd mariadb-server)

want=("${packages[@]}")
if [[ "${1:-}" == "--with-test-extras" ]]; then want+=("${extras[@]}"); fi

missing=()
for p in "${want[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]} == 0)); then
  echo "install-deps: all ${#want[@]} packages present"
  exit 0
fi
echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}"
