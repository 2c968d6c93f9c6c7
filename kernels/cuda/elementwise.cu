// Element-wise ops over flat buffers: residual add, scale, casts, loss-scale
// unscale with overflow check, NEFTune noise. Rules from kernels/math.
#include "kernels/cuda/cuda_backend.cuh"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/launch.cuh"
#include "kernels/math/loss_scale.h"
#include "kernels/math/neftune.h"

namespace tune::kernels::cuda {

namespace {

template <class T>
__global__ void add_kernel(T* out, const T* a, const T* b, std::int64_t n) {
    TUNE_GRID_STRIDE(i, n) store(out, i, load(a, i) + load(b, i));
}

template <class T>
__global__ void scale_kernel(T* x, std::int64_t n, float s) {
    TUNE_GRID_STRIDE(i, n) store(x, i, load(x, i) * s);
}

template <class D, class S>
__global__ void cast_kernel(D* dst, const S* src, std::int64_t n) {
    TUNE_GRID_STRIDE(i, n) store(dst, i, load(src, i));
}

// found_inf is written only on overflow, by any thread that sees one (same value).
template <class T>
__global__ void unscale_kernel(T* x, std::int64_t n, float s, float* found_inf) {
    bool overflow = false;
    TUNE_GRID_STRIDE(i, n) {
        const float v = math::unscale(load(x, i), s, overflow);
        if (s != 1.0f) store(x, i, v);
    }
    if (__syncthreads_or(overflow) && threadIdx.x == 0) *found_inf = 1.0f;
}

template <class T>
__global__ void neftune_kernel(T* x, std::int64_t n, float scale, std::uint64_t seed) {
    TUNE_GRID_STRIDE(i, n) store(x, i, math::neftune_noise(load(x, i), scale, seed, static_cast<std::uint64_t>(i)));
}

}  // namespace

void CudaBackend::add(void* out, const void* a, const void* b, std::int64_t n, DType dtype) {
    if (n <= 0) return;
    with_float_type(dtype, "add", [&](auto t) {
        using T = decltype(t);
        TUNE_LAUNCH(add_kernel, grid_for(n), kThreads, 0, stream_)(static_cast<T*>(out), static_cast<const T*>(a),
                                                           static_cast<const T*>(b), n);
    });
    TUNE_CUDA_CHECK_LAUNCH("add_kernel");
}

void CudaBackend::scale(void* x, std::int64_t n, float s, DType dtype) {
    if (n <= 0) return;
    with_float_type(dtype, "scale", [&](auto t) {
        using T = decltype(t);
        TUNE_LAUNCH(scale_kernel, grid_for(n), kThreads, 0, stream_)(static_cast<T*>(x), n, s);
    });
    TUNE_CUDA_CHECK_LAUNCH("scale_kernel");
}

void CudaBackend::cast(void* dst, DType dst_dtype, const void* src, DType src_dtype, std::int64_t n) {
    if (n <= 0) return;
    with_float_type(dst_dtype, "cast", [&](auto td) {
        with_float_type(src_dtype, "cast", [&](auto ts) {
            using D = decltype(td);
            using S = decltype(ts);
            TUNE_LAUNCH(cast_kernel, grid_for(n), kThreads, 0, stream_)(static_cast<D*>(dst), static_cast<const S*>(src), n);
        });
    });
    TUNE_CUDA_CHECK_LAUNCH("cast_kernel");
}

void CudaBackend::unscale(void* x, std::int64_t n, float s, float* found_inf, DType dtype) {
    if (n <= 0) return;
    with_float_type(dtype, "unscale", [&](auto t) {
        using T = decltype(t);
        TUNE_LAUNCH(unscale_kernel, grid_for(n), kThreads, 0, stream_)(static_cast<T*>(x), n, s, found_inf);
    });
    TUNE_CUDA_CHECK_LAUNCH("unscale_kernel");
}

void CudaBackend::neftune_noise(void* x, std::int64_t n, float scale, std::uint64_t seed, DType dtype) {
    if (n <= 0) return;
    with_float_type(dtype, "neftune_noise", [&](auto t) {
        using T = decltype(t);
        TUNE_LAUNCH(neftune_kernel, grid_for(n), kThreads, 0, stream_)(static_cast<T*>(x), n, scale, seed);
    });
    TUNE_CUDA_CHECK_LAUNCH("neftune_kernel");
}

}  // namespace tune::kernels::cuda
