// SwiGLU (Llama MLP): out = silu(gate) * up and its backward, one thread per
// element; gate/up rows have stride in_stride (halves of one fused GEMM). The
// trainer's rows are contiguous (stride == F): then the input index is the
// output's, with no 64-bit division per element (the branch is the same for
// every thread of the launch).
#include "kernels/cuda/cuda_backend.cuh"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/launch.cuh"
#include "kernels/math/activations.h"

namespace tune::kernels::cuda {

namespace {

// Where element `idx` of the contiguous (N, F) output reads its strided inputs.
__device__ inline std::int64_t input_index(std::int64_t idx, std::int64_t f, std::int64_t stride) {
    return stride == f ? idx : (idx / f) * stride + idx % f;
}

// out (N, F) contiguous; gate, up (N, F) with row stride `stride`.
template <class T>
__global__ void swiglu_forward_kernel(T* out, const T* gate, const T* up, std::int64_t n, std::int64_t f,
                                      std::int64_t stride) {
    TUNE_GRID_STRIDE(idx, n * f) {
        const std::int64_t in = input_index(idx, f, stride);
        store(out, idx, math::swiglu(load(gate, in), load(up, in)));
    }
}

// dup may alias dout when stride == f: each element is read before written.
template <class T>
__global__ void swiglu_backward_kernel(T* dgate, T* dup, const T* dout, const T* gate, const T* up, std::int64_t n,
                                       std::int64_t f, std::int64_t stride) {
    TUNE_GRID_STRIDE(idx, n * f) {
        const std::int64_t in = input_index(idx, f, stride);
        float dg, du;
        math::swiglu_backward(load(gate, in), load(up, in), load(dout, idx), dg, du);
        store(dgate, in, dg);
        store(dup, in, du);
    }
}

}  // namespace

void CudaBackend::swiglu_forward(void* out, const void* gate, const void* up, std::int64_t n, std::int64_t f,
                                 std::int64_t in_stride, DType dtype) {
    require(n >= 0 && f >= 0 && in_stride >= f, "swiglu_forward", "row stride smaller than F");
    if (n * f == 0) return;
    with_float_type(dtype, "swiglu_forward", [&](auto t) {
        using T = decltype(t);
        TUNE_LAUNCH(swiglu_forward_kernel, grid_for(n * f), kThreads, 0, stream_)(
            static_cast<T*>(out), static_cast<const T*>(gate), static_cast<const T*>(up), n, f, in_stride);
    });
    TUNE_CUDA_CHECK_LAUNCH("swiglu_forward_kernel");
}

void CudaBackend::swiglu_backward(void* dgate, void* dup, const void* dout, const void* gate, const void* up,
                                  std::int64_t n, std::int64_t f, std::int64_t in_stride, DType dtype) {
    require(n >= 0 && f >= 0 && in_stride >= f, "swiglu_backward", "row stride smaller than F");
    if (n * f == 0) return;
    with_float_type(dtype, "swiglu_backward", [&](auto t) {
        using T = decltype(t);
        TUNE_LAUNCH(swiglu_backward_kernel, grid_for(n * f), kThreads, 0, stream_)(
            static_cast<T*>(dgate), static_cast<T*>(dup), static_cast<const T*>(dout), static_cast<const T*>(gate),
            static_cast<const T*>(up), n, f, in_stride);
    });
    TUNE_CUDA_CHECK_LAUNCH("swiglu_backward_kernel");
}

}  // namespace tune::kernels::cuda
