// SwiGLU (Llama MLP): out = silu(gate) * up and its backward. gate/up rows
// have stride in_stride: 2F when they are the halves of one fused GEMM, F
// when separate. Where F and the stride are multiples of 8 and every buffer is
// 16-byte aligned (Llama's F always is), a thread takes a pack of 8 columns of
// one row with 16-byte accesses (kernels/cuda/packs.cuh) and divides once per
// pack for its row; otherwise one element per thread.
#include <type_traits>

#include "kernels/cuda/cuda_backend.cuh"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/launch.cuh"
#include "kernels/cuda/packs.cuh"
#include "kernels/math/activations.h"

namespace tune::kernels::cuda {

namespace {

// Where element `idx` of the contiguous (N, F) output reads its strided inputs.
__device__ inline std::int64_t input_index(std::int64_t idx, std::int64_t f, std::int64_t stride) {
    return stride == f ? idx : (idx / f) * stride + idx % f;
}

// The whole loop: W = kPack over packs of 8 columns, else over elements. body(o, in) takes W elements
// at output index o and input index in.
template <int W, class Body>
__device__ __forceinline__ void for_each_unit(std::int64_t n, std::int64_t f, std::int64_t stride, Body body) {
    if constexpr (W == kPack) {
        const std::int64_t row_packs = f / kPack;
        TUNE_GRID_STRIDE(k, n * row_packs) {
            const std::int64_t r = k / row_packs, c = (k - r * row_packs) * kPack;
            body(r * f + c, r * stride + c);
        }
    } else {
        TUNE_GRID_STRIDE(idx, n * f) body(idx, input_index(idx, f, stride));
    }
}

// out (N, F) contiguous; gate, up (N, F) with row stride `stride`.
template <int W, class T>
__global__ void swiglu_forward_kernel(T* out, const T* gate, const T* up, std::int64_t n, std::int64_t f,
                                      std::int64_t stride) {
    for_each_unit<W>(n, f, stride, [&](std::int64_t o, std::int64_t in) {
        float g[W], u[W];
        load_w<W>(gate, in, g);
        load_w<W>(up, in, u);
        for (int j = 0; j < W; ++j) g[j] = math::swiglu(g[j], u[j]);
        store_w<W>(out, o, g);
    });
}

// dup may alias dout when stride == f: each element is read before written.
template <int W, class T>
__global__ void swiglu_backward_kernel(T* dgate, T* dup, const T* dout, const T* gate, const T* up, std::int64_t n,
                                       std::int64_t f, std::int64_t stride) {
    for_each_unit<W>(n, f, stride, [&](std::int64_t o, std::int64_t in) {
        float g[W], u[W], dy[W];
        load_w<W>(gate, in, g);
        load_w<W>(up, in, u);
        load_w<W>(dout, o, dy);
        for (int j = 0; j < W; ++j) math::swiglu_backward(g[j], u[j], dy[j], g[j], u[j]);
        store_w<W>(dgate, in, g);
        store_w<W>(dup, in, u);
    });
}

// Whether the pack loop applies: whole packs per row and every buffer 16-byte aligned.
bool packed(std::int64_t f, std::int64_t stride, DType t, std::initializer_list<const void*> buffers) {
    if (f % kPack != 0 || stride % kPack != 0) return false;
    for (const void* p : buffers)
        if (!aligned16(p, t, 0)) return false;
    return true;
}

}  // namespace

void CudaBackend::swiglu_forward(void* out, const void* gate, const void* up, std::int64_t n, std::int64_t f,
                                 std::int64_t in_stride, DType dtype) {
    require(n >= 0 && f >= 0 && in_stride >= f, "swiglu_forward", "row stride smaller than F");
    if (n * f == 0) return;
    with_float_type(dtype, "swiglu_forward", [&](auto t) {
        using T = decltype(t);
        auto launch = [&](auto w) {
            constexpr int W = decltype(w)::value;
            TUNE_LAUNCH(swiglu_forward_kernel<W>, grid_for(n * f / W), kThreads, 0, stream_)
            (static_cast<T*>(out), static_cast<const T*>(gate), static_cast<const T*>(up), n, f, in_stride);
        };
        if (packed(f, in_stride, dtype, {out, gate, up}))
            launch(std::integral_constant<int, kPack>{});
        else
            launch(std::integral_constant<int, 1>{});
    });
    TUNE_CUDA_CHECK_LAUNCH("swiglu_forward_kernel");
}

void CudaBackend::swiglu_backward(void* dgate, void* dup, const void* dout, const void* gate, const void* up,
                                  std::int64_t n, std::int64_t f, std::int64_t in_stride, DType dtype) {
    require(n >= 0 && f >= 0 && in_stride >= f, "swiglu_backward", "row stride smaller than F");
    if (n * f == 0) return;
    with_float_type(dtype, "swiglu_backward", [&](auto t) {
        using T = decltype(t);
        auto launch = [&](auto w) {
            constexpr int W = decltype(w)::value;
            TUNE_LAUNCH(swiglu_backward_kernel<W>, grid_for(n * f / W), kThreads, 0, stream_)
            (static_cast<T*>(dgate), static_cast<T*>(dup), static_cast<const T*>(dout), static_cast<const T*>(gate),
             static_cast<const T*>(up), n, f, in_stride);
        };
        if (packed(f, in_stride, dtype, {dgate, dup, dout, gate, up}))
            launch(std::integral_constant<int, kPack>{});
        else
            launch(std::integral_constant<int, 1>{});
    });
    TUNE_CUDA_CHECK_LAUNCH("swiglu_backward_kernel");
}

}  // namespace tune::kernels::cuda
