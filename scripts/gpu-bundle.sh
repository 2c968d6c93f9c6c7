#!/usr/bin/env bash
# Packs a built tune for a GPU machine that has the NVIDIA driver, CUDA's
# cuBLAS/cuBLASLt and NCCL but not this machine's other libraries (a cloud or
# container image without OpenBLAS, SQLite, TOML++, fmt or OpenMPI):
#   scripts/gpu-bundle.sh [build-dir] [out.tar.gz]   (defaults: build, tune-gpu.tar.gz)
# On the GPU machine, in a checkout of the same commit:
#   mkdir -p /tmp/tune-gpu && tar xzf tune-gpu.tar.gz -C /tmp/tune-gpu && /tmp/tune-gpu/validate.sh
# validate.sh puts the bundled libraries before the machine's cuBLAS, cuBLASLt
# and NCCL (theirs match their driver; the CUDA runtime is this build's) and
# runs scripts/gpu-validate.sh on the bundled binaries. Multi-GPU steps need
# mpirun there. The build must have the CUDA backend (nvcc found at configure).
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
build="${1:-$repo/build}"
out="$(realpath -m "${2:-tune-gpu.tar.gz}")"
for f in "$build/tune" "$build/tests/tune_tests_gpu"; do
  [[ -x "$f" ]] || { echo "gpu-bundle: $f is missing: build first (scripts/build.sh with nvcc present)" >&2; exit 2; }
done
if ! ldd "$build/tune" | grep -q libcudart; then
  echo "gpu-bundle: $build/tune has no CUDA backend (configure found no nvcc)" >&2; exit 2
fi
stage="$(mktemp -d)"
trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage/lib" "$stage/fallback"
cp "$build/tune" "$build/tests/tune_tests_gpu" "$stage/"
# glibc comes from the target (a newer one runs these binaries); libstdc++ only
# where the target's is older than this one (validate.sh tries it last).
for lib in $(ldd "$build/tune" "$build/tests/tune_tests_gpu" | awk '/=> \//{print $3}' | sort -u); do
  case "$(basename "$lib")" in
    libc.so.*|libm.so.*|libdl.so.*|libpthread.so.*|librt.so.*|ld-linux*) ;;
    libcublas.so.*|libcublasLt.so.*|libnccl.so.*) ;;
    libstdc++.so.*|libgcc_s.so.*) cp -L "$lib" "$stage/fallback/" ;;
    *) cp -L "$lib" "$stage/lib/" ;;
  esac
done
cat >"$stage/validate.sh" <<'RUN'
#!/usr/bin/env bash
# Runs scripts/gpu-validate.sh of the checkout this is called from (or $1) on the bundled tune.
set -u
here="$(cd "$(dirname "$0")" && pwd)"
repo="${1:-$PWD}"
[[ -x "$repo/scripts/gpu-validate.sh" ]] || { echo "validate.sh: run it in a tune checkout, or pass its path" >&2; exit 2; }
dirs=""
for name in libcublasLt.so.13 libcublas.so.13 libnccl.so.2; do
  found=$(find /usr/local/cuda*/ /usr/lib /usr/lib64 /opt -name "$name" 2>/dev/null | head -n 1)
  [[ -n "$found" ]] && dirs="$dirs:$(dirname "$found")" || echo "validate.sh: $name not found on this machine" >&2
done
export LD_LIBRARY_PATH="$here/lib$dirs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
"$here/tune" --version >/dev/null 2>&1 || export LD_LIBRARY_PATH="$LD_LIBRARY_PATH:$here/fallback"
TUNE_BIN="$here/tune" TUNE_GPU_TESTS="$here/tune_tests_gpu" exec "$repo/scripts/gpu-validate.sh"
RUN
chmod +x "$stage/validate.sh"
tar czf "$out" -C "$stage" .
echo "gpu-bundle: $out ($(du -h "$out" | cut -f1)); commit $(git -C "$repo" rev-parse --short=12 HEAD)"
