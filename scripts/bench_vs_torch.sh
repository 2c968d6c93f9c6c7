#!/usr/bin/env bash
# Times an fp32 AdamW training step of the same Llama in `tune trial` (CPU
# backend) and in PyTorch (scripts/bench_torch_step.py), with the same thread
# count, and prints both step times and the ratio (target: tune <= 1.0x).
#
#   scripts/bench_vs_torch.sh [--model small] [--micro-batch 4] [--context 256]
#                             [--threads N] [--steps 6] [--warmup 2] [--tune PATH]
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
model=small micro_batch=4 context=256 threads=$(nproc) steps=6 warmup=2
tune="${TUNE:-$here/../build/tune}"
while [[ $# -gt 0 ]]; do
  case "$1" in
    --model) model=$2; shift 2 ;;
    --micro-batch) micro_batch=$2; shift 2 ;;
    --context) context=$2; shift 2 ;;
    --threads) threads=$2; shift 2 ;;
    --steps) steps=$2; shift 2 ;;
    --warmup) warmup=$2; shift 2 ;;
    --tune) tune=$2; shift 2 ;;
    *) echo "unknown argument $1" >&2; exit 2 ;;
  esac
done
[[ -x "$tune" ]] || { echo "no tune binary at $tune (build it, or pass --tune PATH)" >&2; exit 2; }

export OMP_NUM_THREADS=$threads OPENBLAS_NUM_THREADS=$threads
result=$("$tune" trial --model "$model" --optimizer adamw --precision fp32 --micro-batch "$micro_batch" \
  --context "$context" --steps "$steps" --warmup "$warmup" --threads "$threads" --clip 1 2>/dev/null | tail -1)
read -r ours dims < <(python3 -c '
import json, sys
r = json.loads(sys.argv[1])
if r["status"] != "ok": sys.exit("tune trial: " + r["status"] + ": " + r.get("reason", ""))
w = int(sys.argv[2]); ms = r["step_ms"][w:]; m = r["config"]["model"]
names = {"vocab": "--vocab", "hidden": "--hidden", "layers": "--layers", "heads": "--heads", "kv_heads": "--kv-heads", "ffn": "--ffn"}
flags = " ".join(flag + " " + str(m[k]) for k, flag in names.items())
print(sum(ms) / len(ms), flags)' "$result" "$warmup")
# shellcheck disable=SC2086
theirs=$(/usr/bin/python3 "$here/bench_torch_step.py" $dims --batch "$micro_batch" --context "$context" \
  --steps "$steps" --warmup "$warmup" --threads "$threads" 2>/dev/null | tail -1)
python3 -c '
import sys
ours, theirs = float(sys.argv[1]), float(sys.argv[2])
print(f"model {sys.argv[3]}, micro-batch {sys.argv[4]}, context {sys.argv[5]}, {sys.argv[6]} thread(s), fp32 AdamW")
print(f"tune trial  {ours:9.1f} ms/step")
print(f"pytorch     {theirs:9.1f} ms/step")
print(f"ratio       {ours / theirs:9.2f}x (tune / pytorch; target <= 1.0)")' \
  "$ours" "$theirs" "$model" "$micro_batch" "$context" "$threads"
