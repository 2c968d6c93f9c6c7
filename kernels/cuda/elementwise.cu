// Element-wise ops over flat buffers: residual add, scale, casts, loss-scale
// unscale with overflow check, NEFTune noise. Rules from kernels/math. Add,
// scale, cast and unscale step by packs of 8 elements with 16-byte accesses
// (kernels/cuda/packs.cuh) where their buffers are 16-byte aligned, then take
// the tail (or an unaligned buffer) one element at a time.
#include "kernels/cuda/cuda_backend.cuh"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/launch.cuh"
#include "kernels/cuda/packs.cuh"
#include "kernels/math/loss_scale.h"
#include "kernels/math/neftune.h"

namespace tune::kernels::cuda {

namespace {

// Packs of 8 when every pointer is 16-byte aligned, else none.
std::int64_t packs_of(std::int64_t n, std::initializer_list<std::pair<const void*, DType>> buffers) {
    for (const auto& [p, t] : buffers)
        if (!aligned16(p, t, 0)) return 0;
    return n / kPack;
}

template <int W, class T>
__device__ __forceinline__ void add_at(T* out, const T* a, const T* b, std::int64_t i) {
    float x[W], y[W];
    load_w<W>(a, i, x);
    load_w<W>(b, i, y);
    for (int j = 0; j < W; ++j) x[j] += y[j];
    store_w<W>(out, i, x);
}

template <class T>
__global__ void add_kernel(T* out, const T* a, const T* b, std::int64_t n, std::int64_t packs) {
    TUNE_GRID_STRIDE(k, packs) add_at<kPack>(out, a, b, k * kPack);
    TUNE_GRID_STRIDE(k, n - packs * kPack) add_at<1>(out, a, b, packs * kPack + k);
}

template <int W, class T>
__device__ __forceinline__ void scale_at(T* x, std::int64_t i, float s) {
    float v[W];
    load_w<W>(x, i, v);
    for (int j = 0; j < W; ++j) v[j] *= s;
    store_w<W>(x, i, v);
}

template <class T>
__global__ void scale_kernel(T* x, std::int64_t n, float s, std::int64_t packs) {
    TUNE_GRID_STRIDE(k, packs) scale_at<kPack>(x, k * kPack, s);
    TUNE_GRID_STRIDE(k, n - packs * kPack) scale_at<1>(x, packs * kPack + k, s);
}

template <int W, class D, class S>
__device__ __forceinline__ void cast_at(D* dst, const S* src, std::int64_t i) {
    float v[W];
    load_w<W>(src, i, v);
    store_w<W>(dst, i, v);
}

template <class D, class S>
__global__ void cast_kernel(D* dst, const S* src, std::int64_t n, std::int64_t packs) {
    TUNE_GRID_STRIDE(k, packs) cast_at<kPack>(dst, src, k * kPack);
    TUNE_GRID_STRIDE(k, n - packs * kPack) cast_at<1>(dst, src, packs * kPack + k);
}

template <int W, class T>
__device__ __forceinline__ void unscale_at(T* x, std::int64_t i, float s, bool& overflow) {
    float v[W];
    load_w<W>(x, i, v);
    for (int j = 0; j < W; ++j) v[j] = math::unscale(v[j], s, overflow);
    if (s != 1.0f) store_w<W>(x, i, v);
}

// found_inf is written only on overflow, by any thread that sees one (same value).
template <class T>
__global__ void unscale_kernel(T* x, std::int64_t n, float s, float* found_inf, std::int64_t packs) {
    bool overflow = false;
    TUNE_GRID_STRIDE(k, packs) unscale_at<kPack>(x, k * kPack, s, overflow);
    TUNE_GRID_STRIDE(k, n - packs * kPack) unscale_at<1>(x, packs * kPack + k, s, overflow);
    if (__syncthreads_or(overflow) && threadIdx.x == 0) *found_inf = 1.0f;
}

template <class T>
__global__ void neftune_kernel(T* x, std::int64_t n, float scale, std::uint64_t seed) {
    TUNE_GRID_STRIDE(i, n) store(x, i, math::neftune_noise(load(x, i), scale, seed, static_cast<std::uint64_t>(i)));
}

}  // namespace

void CudaBackend::add(void* out, const void* a, const void* b, std::int64_t n, DType dtype) {
    if (n <= 0) return;
    const std::int64_t packs = packs_of(n, {{out, dtype}, {a, dtype}, {b, dtype}});
    with_float_type(dtype, "add", [&](auto t) {
        using T = decltype(t);
        TUNE_LAUNCH(add_kernel, pack_grid(n, packs), kThreads, 0, stream_)
        (static_cast<T*>(out), static_cast<const T*>(a), static_cast<const T*>(b), n, packs);
    });
    TUNE_CUDA_CHECK_LAUNCH("add_kernel");
}

void CudaBackend::scale(void* x, std::int64_t n, float s, DType dtype) {
    if (n <= 0) return;
    const std::int64_t packs = packs_of(n, {{x, dtype}});
    with_float_type(dtype, "scale", [&](auto t) {
        using T = decltype(t);
        TUNE_LAUNCH(scale_kernel, pack_grid(n, packs), kThreads, 0, stream_)(static_cast<T*>(x), n, s, packs);
    });
    TUNE_CUDA_CHECK_LAUNCH("scale_kernel");
}

void CudaBackend::cast(void* dst, DType dst_dtype, const void* src, DType src_dtype, std::int64_t n) {
    if (n <= 0) return;
    const std::int64_t packs = packs_of(n, {{dst, dst_dtype}, {src, src_dtype}});
    with_float_type(dst_dtype, "cast", [&](auto td) {
        with_float_type(src_dtype, "cast", [&](auto ts) {
            using D = decltype(td);
            using S = decltype(ts);
            TUNE_LAUNCH(cast_kernel, pack_grid(n, packs), kThreads, 0, stream_)
            (static_cast<D*>(dst), static_cast<const S*>(src), n, packs);
        });
    });
    TUNE_CUDA_CHECK_LAUNCH("cast_kernel");
}

void CudaBackend::unscale(void* x, std::int64_t n, float s, float* found_inf, DType dtype) {
    if (n <= 0) return;
    const std::int64_t packs = packs_of(n, {{x, dtype}});
    with_float_type(dtype, "unscale", [&](auto t) {
        using T = decltype(t);
        TUNE_LAUNCH(unscale_kernel, pack_grid(n, packs), kThreads, 0, stream_)
        (static_cast<T*>(x), n, s, found_inf, packs);
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
