#!/usr/bin/env bash
# Prints the dated results file a GPU check appends to, creating it with its
# header when it is new:  docs/results/YYYY-MM-DD-gpu.md  (UTC date; GPU_RESULTS overrides).
# docs/gpu-validation.md states what the checks are; what they measured goes here,
# one file per day, each section naming its card, commit and command.
set -eu
repo="$(cd "$(dirname "$0")/.." && pwd)"
file="${GPU_RESULTS:-$repo/docs/results/$(date -u +%Y-%m-%d)-gpu.md}"
if [[ ! -s "$file" ]]; then
  mkdir -p "$(dirname "$file")"
  {
    echo "# GPU checks, $(date -u +%Y-%m-%d)"
    echo
    echo "Appended by \`scripts/gpu-validate.sh\`, \`scripts/gpu-peer.sh\` and \`scripts/hf-memory-check.py\`;"
    echo "what each check is: \`docs/gpu-validation.md\`. Each section names its card, commit and command."
  } >"$file"
fi
echo "$file"
