// Shared launch plumbing of the CUDA ops: argument checks (host/shape_checks.h)
// that raise BackendError, the dtype -> storage type dispatch, element access in fp32
// (the same kernels/math conversions the CPU backend uses), grid sizing.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <string>

#include "kernels/cuda/host/shape_checks.h"
#include "kernels/dtype.h"
#include "kernels/error.h"
#include "kernels/math/half.h"

namespace tune::kernels::cuda {

// f(T{}) with T = float, math::bf16 or math::fp16 for f32, bf16, f16.
template <class F>
void with_float_type(DType t, const char* op, F&& f) {
    switch (t) {
        case DType::f32:
            f(float{});
            return;
        case DType::bf16:
            f(math::bf16{});
            return;
        case DType::f16:
            f(math::fp16{});
            return;
        default:
            break;
    }
    throw BackendError(std::string("cuda backend: ") + op + ": dtype " + std::string(dtype_name(t)) +
                       " is not a float storage type");
}

template <class T>
__device__ __forceinline__ float load(const T* p, std::int64_t i) {
    return math::to_float(p[i]);
}

template <class T>
__device__ __forceinline__ void store(T* p, std::int64_t i, float v) {
    p[i] = math::from_float<T>(v);
}

// Element i of a float buffer whose dtype is known only at run time (used
// where several tensors of independent dtypes meet, as in the optimizers).
__device__ __forceinline__ float load_any(const void* p, DType t, std::int64_t i) {
    switch (t) {
        case DType::bf16:
            return math::to_float(static_cast<const math::bf16*>(p)[i]);
        case DType::f16:
            return math::to_float(static_cast<const math::fp16*>(p)[i]);
        default:
            return static_cast<const float*>(p)[i];
    }
}

__device__ __forceinline__ void store_any(void* p, DType t, std::int64_t i, float v) {
    switch (t) {
        case DType::bf16:
            static_cast<math::bf16*>(p)[i] = math::to_bf16(v);
            break;
        case DType::f16:
            static_cast<math::fp16*>(p)[i] = math::to_fp16(v);
            break;
        default:
            static_cast<float*>(p)[i] = v;
            break;
    }
}

// Every kernel launch is written TUNE_LAUNCH(kernel, grid, block, smem, stream)(args...).
// Under nvcc that is exactly kernel<<<grid, block, smem, stream>>>(args...).
// The emulated device (tests/cuda_emu) compiles these files as host C++,
// where <<< >>> is not syntax; there the macro hands the launch shape and a
// lambda calling the kernel to its runtime, which runs every block's
// threads as fibers. A macro rather than a build-time rewrite of the
// sources: it needs no parser of CUDA's launch syntax (whose arguments hold
// templates, casts and commas), and the nvcc build sees the same tokens.
#if defined(TUNE_CUDA_EMU)
#define TUNE_LAUNCH(kernel, grid, block, smem, stream)            \
    ::tune_emu::make_launcher(#kernel, grid, block, smem, stream, \
                              [](auto... tune_emu_args) { kernel(tune_emu_args...); })
#else
#define TUNE_LAUNCH(kernel, grid, block, smem, stream) kernel<<<grid, block, smem, stream>>>
#endif

constexpr int kThreads = 256;

// Blocks for a grid-stride loop over n elements: enough to fill the device,
// never more than the work.
inline unsigned grid_for(std::int64_t n, int threads = kThreads) {
    const std::int64_t wanted = (n + threads - 1) / threads;
    return static_cast<unsigned>(std::clamp<std::int64_t>(wanted, 1, 65536));
}

// Grid-stride index range of the calling thread.
#define TUNE_GRID_STRIDE(i, n)                                                                       \
    for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < (n); \
         i += static_cast<std::int64_t>(gridDim.x) * blockDim.x)

}  // namespace tune::kernels::cuda
