#!/usr/bin/env bash
# The first run on a machine with NVIDIA GPUs: whoever first has one runs
#   scripts/gpu-validate.sh [build-dir]        (default: build)
# It builds with CUDA if needed (or runs TUNE_BIN and TUNE_GPU_TESTS, the
# prebuilt binaries scripts/gpu-bundle.sh carries), then runs, each logged and timed:
#   1. tune devices;
#   2. tune selftest --require-gpu on one GPU (every op and training case
#      against the CPU), and --gpus N when N > 1 GPUs are visible;
#   3. ctest -L gpu with TUNE_REQUIRE_GPU=1 (no GPU is a failure, not a skip);
#   4. where torch and transformers are installed, scripts/gpu-peer.sh: tune
#      beside PyTorch on the same Llama configurations (PEER_BUDGET_S, default 240 s);
#   5. where peft is installed too, scripts/hf-memory-check.py: the hf-trainer
#      profile against HF Trainer's measured peaks (HF_CHECK_BUDGET_S, default 180 s);
#   6. a 2-minute sweep each of `tiny` and `small` on GPU 0;
#   7. where torch, transformers, peft and accelerate are installed,
#      scripts/framework-check.py: every export loaded by the frameworks'
#      classes, and two HF Trainer steps with some;
#   8. the calibration of `overhead`: a one-rank trial of `small` on the GPU,
#      whose memory breakdown carries the measured CUDA context, cuBLASLt and
#      NCCL bytes (device_overhead_bytes);
#   9. an offload trial of `small` (optimizer and fp32 master in pinned host
#      memory, the update on the CPU): its median step against its estimate;
# and appends a section with the outcomes to the day's results file
# (scripts/gpu-results.sh: docs/results/YYYY-MM-DD-gpu.md).
# Exit status: 0 when every step passed, 1 otherwise (the section says which).
set -u -o pipefail

repo="$(cd "$(dirname "$0")/.." && pwd)"
build="${1:-$repo/build}"
doc="$("$repo/scripts/gpu-results.sh")" || exit 1
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

# TUNE_BIN and TUNE_GPU_TESTS: prebuilt binaries (scripts/gpu-bundle.sh's validate.sh sets them).
if [[ -z "${TUNE_BIN:-}" && ! -x "$build/tune" ]]; then
  cmake -S "$repo" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DTUNE_CUDA=ON || exit 1
  cmake --build "$build" -j"$(nproc)" || exit 1
fi
tune="${TUNE_BIN:-$build/tune}"

# cuDNN for tune's fused attention: torch's wheel carries libcudnn.so.9 where no toolkit does.
if [[ -z "${TUNE_CUDNN_LIBRARY:-}" ]]; then
  wheel=$(python3 -c 'import os, nvidia.cudnn as c; print(os.path.join(list(c.__path__)[0], "lib", "libcudnn.so.9"))' 2>/dev/null)
  [[ -n "$wheel" && -e "$wheel" ]] && export TUNE_CUDNN_LIBRARY="$wheel"
fi

failed=0
results=()
# step NAME COMMAND...: runs it, keeps its output, records pass/fail and seconds.
step() {
  local name="$1"; shift
  local log="$work/${name// /_}.log" start end status
  start=$(date +%s)
  "$@" >"$log" 2>&1
  status=$?
  end=$(date +%s)
  if [[ $status -eq 0 ]]; then results+=("| $name | pass | $((end - start)) s |")
  else results+=("| $name | FAIL (exit $status) | $((end - start)) s |"); failed=1; fi
  echo "== $name: exit $status"
  tail -n 40 "$log"
}

step "devices" "$tune" devices
gpus=$("$tune" devices --json 2>/dev/null | python3 -c 'import json,sys; print(len(json.load(sys.stdin)["devices"]))' 2>/dev/null || echo 0)
step "selftest 1 GPU" "$tune" selftest --require-gpu
if [[ "$gpus" -gt 1 ]]; then
  step "selftest $gpus GPUs" "$tune" selftest --require-gpu --gpus "$gpus"
fi
if [[ -n "${TUNE_GPU_TESTS:-}" ]]; then
  step "GPU tests" env TUNE_REQUIRE_GPU=1 "$TUNE_GPU_TESTS"
else
  step "ctest -L gpu" env TUNE_REQUIRE_GPU=1 ctest --test-dir "$build" -L gpu --output-on-failure
fi

# The peer run: tune beside PyTorch on the same configurations (scripts/gpu-peer.sh,
# issue 37's goal), where torch and transformers are installed; its own table goes to the same results file.
if python3 -c 'import torch, transformers' 2>/dev/null; then
  step "peer benchmark" env TUNE_BIN="$tune" PEER_BUDGET_S="${PEER_BUDGET_S:-240}" "$repo/scripts/gpu-peer.sh"
fi

# Issue 36's check: the hf-trainer profile against HF Trainer's measured peaks (scripts/hf-memory-check.py).
if python3 -c 'import torch, transformers, peft' 2>/dev/null; then
  step "hf-trainer memory check" python3 "$repo/scripts/hf-memory-check.py" --tune "$tune" \
    --budget-s "${HF_CHECK_BUDGET_S:-180}"
fi

for model in tiny small; do
  cat >"$work/$model.toml" <<EOF
name = "gpu-validate-$model"
[model]
preset = "$model"
[hardware]
gpus = 1
device = "auto"
memory_limit = "auto"
[space]
optimizer = ["adamw", "lion", "adam8bit", "adafactor", "lomo"]
precision = ["fp32", "bf16-mixed", "fp16-mixed", "bf16"]
zero_stage = [0]
grad_accum = [1, 2]
checkpointing = ["none", "selective", "full"]
context = [256]
micro_batch = [1, 4]
[trial]
steps = 4
warmup = 1
timeout = "60s"
[search]
budget = "2m"
[output]
database = "$work/$model.db"
report = "$work/$model.html"
EOF
  step "sweep $model (2 min)" "$tune" sweep "$work/$model.toml"
done

# The exports against the frameworks' own code: every file loaded by their classes, two HF
# Trainer steps with some (where torch, transformers, peft, accelerate exist).
if python3 -c 'import torch, transformers, peft, accelerate' 2>/dev/null; then
  step "framework check" python3 "$repo/scripts/framework-check.py" --tune "$tune" --out "$work/framework.md"
fi

overhead_json="$work/overhead.json"
step "overhead calibration" sh -c "\"$tune\" trial --model small --backend cuda --steps 4 --warmup 1 | tail -n 1 > \"$overhead_json\""
overhead=$(python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); print(r["memory"]["overhead"])' "$overhead_json" 2>/dev/null || echo "?")

offload_json="$work/offload.json"
step "offload trial" sh -c "\"$tune\" trial --model small --backend cuda --zero 2 --offload optimizer --precision bf16-mixed --steps 6 --warmup 2 | tail -n 1 > \"$offload_json\""
offload=$(python3 -c '
import json, statistics, sys
r = json.load(open(sys.argv[1]))
measured = statistics.median(r["step_ms"][2:]) / 1e3
estimated = r["estimate"]["time"]["step_s"]
host = r["host_memory"]["peak"]
error = 100 * (estimated - measured) / measured
print(f"median step {measured:.4f} s, estimate {estimated:.4f} s, error {error:+.1f}%, host ledger {host} bytes")
' "$offload_json" 2>/dev/null || echo "?")

{
  echo
  echo "## $(date -u +%Y-%m-%d) on $(hostname): $("$tune" devices 2>/dev/null | head -n 3 | tr '\n' ' ')"
  echo
  echo "Commit $(git -C "$repo" rev-parse --short=12 HEAD). Measured device overhead (context, cuBLASLt, NCCL): $overhead bytes."
  echo
  echo "Offload trial (small, ZeRO-2, optimizer on the host, bf16-mixed): $offload."
  echo
  echo "| step | result | time |"
  echo "|---|---|---|"
  printf '%s\n' "${results[@]}"
  echo
  if [[ -f "$work/framework.md" ]]; then
    echo "Framework check (scripts/framework-check.py): $(head -n 1 "$work/framework.md")"
    echo
    sed -n '3,4p' "$work/framework.md"
    grep -E '^\| .* \| (trained|FAIL) \|' "$work/framework.md"
    echo
  fi
  echo "Self-test (1 GPU), last lines:"
  echo
  echo '```'
  tail -n 25 "$work/selftest_1_GPU.log"
  echo '```'
} >>"$doc"
echo "appended a section to $doc"
exit $failed
