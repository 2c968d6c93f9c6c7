// RoPE, rotate-half (Hugging Face Llama): one thread per (token, head, pair).
// Angles from kernels/math/rope.h, the same fp32 formula as the CPU backend.
#include "kernels/cuda/cuda_backend.cuh"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/launch.cuh"
#include "kernels/math/rope.h"

namespace tune::kernels::cuda {

namespace {

struct RopeLayout {
    std::int64_t batch, seq, heads, head_dim, out_stride, in_stride;
};

// out, in (B, S, heads, D) with row strides; in place allowed (each pair is
// read before it is written, by the one thread that owns it).
template <class T>
__global__ void rope_kernel(T* out, const T* in, RopeLayout l, math::RopeFrequencies freq, bool inverse) {
    const std::int64_t half = l.head_dim / 2;
    const std::int64_t total = l.batch * l.seq * l.heads * half;
    TUNE_GRID_STRIDE(idx, total) {
        const std::int64_t i = idx % half;
        const std::int64_t h = (idx / half) % l.heads;
        const std::int64_t token = idx / (half * l.heads);
        const int pos = static_cast<int>(token % l.seq);
        const T* x = in + token * l.in_stride + h * l.head_dim;
        T* y = out + token * l.out_stride + h * l.head_dim;
        float c, s, y1, y2;
        math::rope_cos_sin(pos, static_cast<int>(i), static_cast<int>(l.head_dim), freq, c, s);
        const float x1 = load(x, i), x2 = load(x, i + half);
        if (inverse) math::rope_rotate_backward(x1, x2, c, s, y1, y2);
        else math::rope_rotate(x1, x2, c, s, y1, y2);
        store(y, i, y1);
        store(y, i + half, y2);
    }
}

void launch(cudaStream_t stream, void* out, const void* in, const RopeLayout& l, const math::RopeFrequencies& freq, bool inverse,
            DType dtype, const char* op) {
    check_rope(l.batch, l.seq, l.heads, l.head_dim, l.out_stride, l.in_stride, op);
    const std::int64_t total = l.batch * l.seq * l.heads * (l.head_dim / 2);
    if (total == 0) return;
    with_float_type(dtype, op, [&](auto t) {
        using T = decltype(t);
        TUNE_LAUNCH(rope_kernel, grid_for(total), kThreads, 0, stream)(static_cast<T*>(out), static_cast<const T*>(in), l,
                                                               freq, inverse);
    });
    TUNE_CUDA_CHECK_LAUNCH("rope_kernel");
}

}  // namespace

void CudaBackend::rope_forward(void* out, std::int64_t out_stride, const void* in, std::int64_t in_stride,
                               std::int64_t batch, std::int64_t seq, std::int64_t heads, std::int64_t head_dim,
                               const math::RopeFrequencies& freq, DType dtype) {
    launch(stream_, out, in, RopeLayout{batch, seq, heads, head_dim, out_stride, in_stride}, freq, false, dtype,
           "rope_forward");
}

void CudaBackend::rope_backward(void* din, std::int64_t din_stride, const void* dout, std::int64_t dout_stride,
                                std::int64_t batch, std::int64_t seq, std::int64_t heads, std::int64_t head_dim,
                                const math::RopeFrequencies& freq, DType dtype) {
    launch(stream_, din, dout, RopeLayout{batch, seq, heads, head_dim, din_stride, dout_stride}, freq, true, dtype,
           "rope_backward");
}

}  // namespace tune::kernels::cuda
