#!/usr/bin/env bash
# The peer benchmark for a lent GPU: the same Llama configurations through
# PyTorch (transformers' LlamaForCausalLM, SDPA on cuDNN, then on flash;
# AdamW(fused=True); scripts/gpu_peer.py) and through `tune trial --backend
# cuda`, alternating, each in its own process, in one call of at most 8 minutes:
#   scripts/gpu-peer.sh [--dry-run]      (TUNE_BIN: the tune binary, default build/tune;
#                                         PEER_BUDGET_S: the call's seconds, default 450;
#                                         PEER_CONFIGS: which of the configurations below, by
#                                         number from 1, e.g. "1 3" (default all);
#                                         PEER_SDPA: PyTorch's SDPA backends, default "cudnn flash";
#                                         PEER_LOGS: a folder to keep every run's output in)
# Prints tokens/s, MFU (tune's FLOP count and peak for both: PyTorch's MFU is
# its tokens/s times tune's MFU per token/s), peak memory (PyTorch's
# max_memory_reserved and the device's used bytes; ours, the real peak) and
# the ratios, and appends them with the card's name to the day's results file
# (scripts/gpu-results.sh: docs/results/YYYY-MM-DD-gpu.md).
# A run past its time cap, or past the call's deadline, is recorded as skipped.
# tune finds cuDNN in torch's wheel (site-packages/nvidia/cudnn/lib) unless
# TUNE_CUDNN_LIBRARY says otherwise; the trial's stderr names the attention path.
set -u -o pipefail

repo="$(cd "$(dirname "$0")/.." && pwd)"
tune="${TUNE_BIN:-$repo/build/tune}"
dry_run=0
[[ "${1:-}" == "--dry-run" ]] && dry_run=1
# PEER_BUDGET_S: seconds for the whole call (default 450, so the last run's cap ends inside 8 minutes).
deadline=$(( $(date +%s) + ${PEER_BUDGET_S:-450} ))
cap=75                              # seconds per process
steps=6 warmup=2

# model precision micro-batch context checkpointing (Llama-2-7B in pure bf16 at
# 2048 tokens both ways the issue names; Llama 3.2 1B in bf16-mixed at 2k, 4k and 8k).
configs=(
  "llama-7b bf16 2 2048 full"
  "llama-7b bf16 1 2048 none"
  "llama3.2-1b bf16-mixed 2 2048 none"
  "llama3.2-1b bf16-mixed 1 4096 full"
  "llama3.2-1b bf16-mixed 1 8192 full"
)

if [[ -z "${TUNE_CUDNN_LIBRARY:-}" && $dry_run -eq 0 ]]; then
  wheel=$(python3 -c 'import os, nvidia.cudnn as c; print(os.path.join(list(c.__path__)[0], "lib", "libcudnn.so.9"))' 2>/dev/null)
  [[ -n "$wheel" && -e "$wheel" ]] && export TUNE_CUDNN_LIBRARY="$wheel"
fi

work="$(mktemp -d)"
trap '[[ -n "${PEER_LOGS:-}" ]] && mkdir -p "$PEER_LOGS" && cp "$work"/* "$PEER_LOGS"/; rm -rf "$work"' EXIT
rows=()

# run NAME COMMAND...: the command's last stdout line into $work/NAME.json, or "skipped"/"failed".
run() {
  local name="$1"; shift
  if [[ $dry_run -eq 1 ]]; then echo "would run: $*"; return 0; fi
  if (( $(date +%s) + cap > deadline )); then echo "skipped (deadline)" >"$work/$name.json"; return 0; fi
  timeout "$cap" "$@" >"$work/$name.out" 2>"$work/$name.err"
  local status=$?
  if [[ $status -eq 0 ]]; then tail -n 1 "$work/$name.out" >"$work/$name.json"
  elif [[ $status -eq 124 ]]; then echo "skipped (over ${cap} s)" >"$work/$name.json"
  else echo "failed (exit $status): $(tail -n 1 "$work/$name.err")" >"$work/$name.json"; fi
}

sdpa="${PEER_SDPA:-cudnn flash}"
i=0
for c in "${configs[@]}"; do
  read -r model precision mb ctx ckpt <<<"$c"
  i=$((i + 1))
  [[ -n "${PEER_CONFIGS:-}" && " $PEER_CONFIGS " != *" $i "* ]] && continue
  torch_args=(--model "$model" --precision "$precision" --micro-batch "$mb" --context "$ctx"
              --checkpointing "$ckpt" --steps "$steps" --warmup "$warmup")
  for b in cudnn flash; do echo "not run (PEER_SDPA)" >"$work/c$i-$b.json"; done
  [[ " $sdpa " == *" cudnn "* ]] && run "c$i-cudnn" python3 "$repo/scripts/gpu_peer.py" "${torch_args[@]}" --sdpa cudnn
  run "c$i-tune" "$tune" trial --backend cuda --json --model "$model" --optimizer adamw --precision "$precision" \
    --micro-batch "$mb" --context "$ctx" --checkpointing "$ckpt" --steps "$steps" --warmup "$warmup" --force
  [[ " $sdpa " == *" flash "* ]] && run "c$i-flash" python3 "$repo/scripts/gpu_peer.py" "${torch_args[@]}" --sdpa flash
  [[ $dry_run -eq 1 ]] && continue
  attention=$(grep -h '^attention: ' "$work/c$i-tune.err" 2>/dev/null | tail -n 1 | cut -c12-)
  rows+=("$(python3 - "$work" "$i" "$c" "${attention:-unknown}" <<'PY'
import json, sys
work, i, config, attention = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4]
def read(name):
    text = open(f"{work}/c{i}-{name}.json").read().strip()
    try:
        return json.loads(text)
    except ValueError:
        return text
ours, cudnn, flash = read("tune"), read("cudnn"), read("flash")
gib = lambda b: f"{b / 2**30:.1f} GiB"
def torch_cell(t):
    if not isinstance(t, dict) or not isinstance(ours, dict) or not ours.get("tokens_per_s"):
        return t if isinstance(t, str) else "-"
    mfu = t["tokens_per_s"] * ours["mfu"] / ours["tokens_per_s"]
    return f"{t['tokens_per_s']:.0f} tok/s, MFU {100 * mfu:.1f}%, reserved {gib(t['max_memory_reserved'])}, device {gib(t['device_used'])}"
best = max((t["tokens_per_s"] for t in (cudnn, flash) if isinstance(t, dict)), default=0)
if isinstance(ours, dict) and ours.get("tokens_per_s"):
    ratio = f"{ours['tokens_per_s'] / best:.2f}x" if best else "-"
    ours_cell = f"{ours['tokens_per_s']:.0f} tok/s, MFU {100 * ours['mfu']:.1f}%, real peak {gib(ours.get('real_peak', 0))}"
else:
    ratio, ours_cell = "-", ours if isinstance(ours, str) else json.dumps(ours)[:120]
print(f"| {config} | {ours_cell} | {torch_cell(cudnn)} | {torch_cell(flash)} | {ratio} | {attention} |")
PY
)")
  echo "${rows[-1]}"
done
[[ $dry_run -eq 1 ]] && exit 0

card=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -n 1)
doc="$("$repo/scripts/gpu-results.sh")" || exit 1
{
  echo
  echo "## Peer benchmark, $(date -u +%Y-%m-%d), ${card:-unknown GPU}"
  echo
  echo "Commit $(git -C "$repo" rev-parse --short=12 HEAD); \`scripts/gpu-peer.sh\`; $steps steps, $warmup warm-up, median of the rest."
  echo
  echo "| model precision micro-batch context checkpointing | tune | PyTorch, SDPA cuDNN | PyTorch, SDPA flash | tune / faster PyTorch | tune's attention |"
  echo "|---|---|---|---|---|---|"
  printf '%s\n' "${rows[@]}"
} >>"$doc"
echo "gpu-peer: appended to $doc"
