#!/usr/bin/env bash
# The prepared run for a lent GPU, one call of at most GPU_BUDGET_S seconds (default 540:
# a lease is 15 minutes of device time, the machine's start included):
#   scripts/gpu-validate.sh [--dry-run] [build-dir]        (default: build)
# It builds with CUDA if needed (or runs TUNE_BIN and TUNE_GPU_TESTS, the prebuilt
# binaries scripts/gpu-bundle.sh carries), then runs these parts in this order,
# each under its own time cap and the call's deadline:
#   1. tune devices;
#   2. tune selftest --require-gpu on one GPU (every op and training case against
#      the CPU), and --gpus N when N > 1 GPUs are visible;
#   3. the gpu tests with TUNE_REQUIRE_GPU=1 (no GPU is a failure, not a skip);
#   4. scripts/gpu-peer.sh: tune beside PyTorch on the same Llama configurations
#      (PEER_CONFIGS, PEER_SDPA choose; needs torch and transformers);
#   5. scripts/framework-check.py: every export loaded by the frameworks' classes,
#      and HF Trainer steps with some (needs torch, transformers, peft, accelerate);
#   6. an offload trial of `small` (optimizer and fp32 master in pinned host memory,
#      the update on the CPU): its median step against its estimate;
#   7. the calibration of `overhead`: a one-rank trial of `small`, whose memory
#      breakdown carries the measured CUDA context, cuBLASLt and NCCL bytes;
#   8. scripts/hf-memory-check.py: the hf-trainer profile against HF Trainer's
#      measured peaks (needs peft too);
#   9. graphs vs eager: the same trial of `small` with its micro-batches replayed
#      as CUDA graphs and with --no-graphs, median steps side by side;
#  10. tune probe at Llama-7B's shapes: the GEMM, attention, element-wise and
#      optimizer rates the time model reads;
#  11. a one-minute sweep of `small`.
# A part whose cap the deadline cuts below 10 s, or whose packages are missing,
# is recorded as skipped. It appends a section with every part's outcome to the
# day's results file (scripts/gpu-results.sh: docs/results/YYYY-MM-DD-gpu.md) and,
# with GPU_LOGS=DIR, keeps each part's whole log there. --dry-run prints the plan.
# Exit status: 0 when every part that ran passed, 1 otherwise.
set -u -o pipefail

repo="$(cd "$(dirname "$0")/.." && pwd)"
dry_run=0
[[ "${1:-}" == "--dry-run" ]] && { dry_run=1; shift; }
build="${1:-$repo/build}"
budget="${GPU_BUDGET_S:-540}"
start=$(date +%s)
deadline=$((start + budget))
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

if [[ $dry_run -eq 0 && -z "${TUNE_BIN:-}" && ! -x "$build/tune" ]]; then
  cmake -S "$repo" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DTUNE_CUDA=ON || exit 1
  cmake --build "$build" -j"$(nproc)" || exit 1
fi
tune="${TUNE_BIN:-$build/tune}"
gpu_tests="${TUNE_GPU_TESTS:-$build/tests/tune_tests_gpu}"

# cuDNN for tune's fused attention: torch's wheel carries libcudnn.so.9 where no toolkit does.
if [[ -z "${TUNE_CUDNN_LIBRARY:-}" ]]; then
  wheel=$(python3 -c 'import os, nvidia.cudnn as c; print(os.path.join(list(c.__path__)[0], "lib", "libcudnn.so.9"))' 2>/dev/null)
  [[ -n "$wheel" && -e "$wheel" ]] && export TUNE_CUDNN_LIBRARY="$wheel"
fi

# has MODULES: they import here (a dry run plans as if they did).
has() { [[ $dry_run -eq 1 ]] || python3 -c "import $1" 2>/dev/null; }
failed=0
results=()
planned=0
# part NAME CAP COMMAND...: runs it under min(CAP, what the deadline leaves), keeps
# its log, records pass, FAIL, over its cap, or skipped, with its seconds.
part() {
  local name="$1" cap="$2"; shift 2
  if [[ $dry_run -eq 1 ]]; then
    planned=$((planned + cap)); echo "part: $name (cap ${cap} s): $*"; return 0
  fi
  local left=$((deadline - $(date +%s)))
  (( left < cap )) && cap=$left
  if (( cap < 10 )); then results+=("| $name | skipped: ${left} s of the ${budget} s budget left | 0 s |"); return 0; fi
  local log="$work/${name// /_}.log" t0 status
  t0=$(date +%s)
  timeout --kill-after=5 "$cap" "$@" >"$log" 2>&1
  status=$?
  local took=$(( $(date +%s) - t0 ))
  case $status in
    0) results+=("| $name | pass | $took s |") ;;
    124|137) results+=("| $name | FAIL: over its cap of $cap s | $took s |"); failed=1 ;;
    *) results+=("| $name | FAIL (exit $status) | $took s |"); failed=1 ;;
  esac
  echo "== $name: exit $status, $took s"
  tail -n 30 "$log"
  [[ -n "${GPU_LOGS:-}" ]] && mkdir -p "$GPU_LOGS" && cp "$log" "$GPU_LOGS/"
  return 0
}
# skip NAME WHY: a part that cannot run here.
skip() { results+=("| $1 | skipped: $2 | 0 s |"); [[ $dry_run -eq 1 ]] && echo "part: $1 skipped: $2"; return 0; }

part "devices" 15 "$tune" devices
gpus=0
[[ $dry_run -eq 0 ]] && gpus=$(timeout 10 "$tune" devices --json 2>/dev/null | python3 -c 'import json,sys; print(len(json.load(sys.stdin)["devices"]))' 2>/dev/null || echo 0)
part "selftest 1 GPU" 60 "$tune" selftest --require-gpu
if [[ "$gpus" -gt 1 ]]; then part "selftest $gpus GPUs" 60 "$tune" selftest --require-gpu --gpus "$gpus"; fi
part "GPU tests" 45 env TUNE_REQUIRE_GPU=1 "$gpu_tests"

# The peer run (issue 37's goal): its own table goes to the same results file.
peer_cap=200
if has "torch, transformers"; then
  part "peer benchmark" "$peer_cap" env TUNE_BIN="$tune" PEER_BUDGET_S=$((peer_cap - 10)) \
    PEER_CONFIGS="${PEER_CONFIGS:-1 3 5}" PEER_SDPA="${PEER_SDPA:-cudnn flash}" ${GPU_LOGS:+PEER_LOGS="$GPU_LOGS/peer"} \
    bash "$repo/scripts/gpu-peer.sh"
else skip "peer benchmark" "torch or transformers missing"; fi

if has "torch, transformers, peft, accelerate"; then
  part "framework check" 90 python3 "$repo/scripts/framework-check.py" --tune "$tune" --runs 3 --out "$work/framework.md"
else skip "framework check" "torch, transformers, peft or accelerate missing"; fi

part "offload trial" 30 sh -c "\"$tune\" trial --model small --backend cuda --zero 2 --offload optimizer --precision bf16-mixed --steps 6 --warmup 2 | tail -n 1 > \"$work/offload.json\""
part "overhead calibration" 25 sh -c "\"$tune\" trial --model small --backend cuda --steps 4 --warmup 1 | tail -n 1 > \"$work/overhead.json\""

if has "torch, transformers, peft"; then
  part "hf-trainer memory check" 80 python3 "$repo/scripts/hf-memory-check.py" --tune "$tune" --budget-s 70
else skip "hf-trainer memory check" "torch, transformers or peft missing"; fi
part "graphs vs eager" 30 sh -c "\"$tune\" trial --model small --backend cuda --steps 10 --warmup 3 | tail -n 1 > \"$work/graphs.json\" && \"$tune\" trial --model small --backend cuda --steps 10 --warmup 3 --no-graphs | tail -n 1 > \"$work/eager.json\""

cat >"$work/probe.toml" <<TOML
name = "gpu-validate-probe"
[model]
preset = "llama-7b"
[hardware]
gpus = 1
device = "auto"
memory_limit = "auto"
[space]
optimizer = ["adamw"]
precision = ["bf16"]
zero_stage = [0]
checkpointing = ["full"]
context = [2048]
micro_batch = [2]
[output]
database = "$work/probe.db"
TOML
part "probe llama-7b" 40 "$tune" probe "$work/probe.toml" --no-cache

cat >"$work/small.toml" <<TOML
name = "gpu-validate-small"
[model]
preset = "small"
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
budget = "1m"
[output]
database = "$work/small.db"
report = "$work/small.html"
TOML
part "sweep small (1 min)" 75 "$tune" sweep "$work/small.toml"

if [[ $dry_run -eq 1 ]]; then
  echo "caps add up to $planned s; the budget is $budget s (GPU_BUDGET_S), and the deadline cuts the last parts"
  exit 0
fi

overhead=$(python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); print(r["memory"]["overhead"])' "$work/overhead.json" 2>/dev/null || echo "?")
offload=$(python3 -c '
import json, statistics, sys
r = json.load(open(sys.argv[1]))
measured = statistics.median(r["step_ms"][2:]) / 1e3
estimated = r["estimate"]["time"]["step_s"]
host = r["host_memory"]["peak"]
error = 100 * (estimated - measured) / measured
print(f"median step {measured:.4f} s, estimate {estimated:.4f} s, error {error:+.1f}%, host ledger {host} bytes")
' "$work/offload.json" 2>/dev/null || echo "?")

graphs=$(python3 -c '
import json, statistics, sys
step = [statistics.median(json.load(open(f))["step_ms"][3:]) for f in sys.argv[1:3]]
print(f"median step {step[0]:.3f} ms with graphs, {step[1]:.3f} ms eager, eager / graphs {step[1] / step[0]:.3f}")
' "$work/graphs.json" "$work/eager.json" 2>/dev/null || echo "?")
launched=$(grep -m 1 "micro-batch graphs:" "$work/graphs_vs_eager.log" 2>/dev/null || echo "?")

doc="$("$repo/scripts/gpu-results.sh")" || exit 1
{
  echo
  echo "## $(date -u +%Y-%m-%d) on $(hostname): $(head -n 3 "$work/devices.log" 2>/dev/null | tr '\n' ' ')"
  echo
  echo "Commit $(git -C "$repo" rev-parse --short=12 HEAD 2>/dev/null || echo unknown); \`scripts/gpu-validate.sh\`, budget $budget s, $(( $(date +%s) - start )) s used."
  echo "Measured device overhead (context, cuBLASLt, NCCL): $overhead bytes."
  echo
  echo "Offload trial (small, ZeRO-2, optimizer on the host, bf16-mixed): $offload."
  echo
  echo "Micro-batch graphs (small, 10 steps, 3 warm-up): $graphs; the trial's log: $launched."
  echo
  echo "| part | result | time |"
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
  if [[ -f "$work/selftest_1_GPU.log" ]]; then
    echo "Self-test (1 GPU), last lines:"
    echo
    echo '```'
    tail -n 25 "$work/selftest_1_GPU.log"
    echo '```'
  fi
} >>"$doc"
echo "appended a section to $doc"
exit $failed
