// RoPE, rotate-half (Hugging Face Llama): one block per token, whose threads
// first compute the token's cos/sin for each of the D/2 pairs into shared
// memory, then rotate every head's pairs from that table. An angle depends on
// the position and the pair only, so the heads share it: a Llama-7B token
// computes 64 cos/sin pairs instead of 2048. Angles from kernels/math/rope.h,
// the same fp32 formula as the CPU backend.
#include "kernels/cuda/cuda_backend.cuh"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/launch.cuh"
#include "kernels/math/rope.h"

namespace tune::kernels::cuda {

namespace {

struct RopeLayout {
    std::int64_t batch, seq, heads, head_dim, out_stride, in_stride;
};

constexpr int kMaxHalf = 256;  // the table's pairs: head_dim up to 512 (checked at launch)

// out, in (B, S, heads, D) with row strides; in place allowed (each pair is
// read before it is written, by the one thread that owns it).
template <class T>
__global__ void rope_kernel(T* out, const T* in, RopeLayout l, math::RopeFrequencies freq, bool inverse) {
    __shared__ float cos_of[kMaxHalf], sin_of[kMaxHalf];
    const int half = static_cast<int>(l.head_dim / 2);
    const int pairs = static_cast<int>(l.heads) * half;
    for (std::int64_t token = blockIdx.x; token < l.batch * l.seq; token += gridDim.x) {
        const int pos = static_cast<int>(token % l.seq);
        for (int i = threadIdx.x; i < half; i += blockDim.x)
            math::rope_cos_sin(pos, i, static_cast<int>(l.head_dim), freq, cos_of[i], sin_of[i]);
        __syncthreads();
        const T* x = in + token * l.in_stride;
        T* y = out + token * l.out_stride;
        for (int j = threadIdx.x; j < pairs; j += blockDim.x) {
            const int i = j % half;
            const std::int64_t at = static_cast<std::int64_t>(j / half) * l.head_dim + i;
            const float x1 = load(x, at), x2 = load(x, at + half);
            float y1, y2;
            if (inverse)
                math::rope_rotate_backward(x1, x2, cos_of[i], sin_of[i], y1, y2);
            else
                math::rope_rotate(x1, x2, cos_of[i], sin_of[i], y1, y2);
            store(y, at, y1);
            store(y, at + half, y2);
        }
        __syncthreads();  // the next token's table waits for every rotation that reads this one
    }
}

void launch(cudaStream_t stream, void* out, const void* in, const RopeLayout& l, const math::RopeFrequencies& freq,
            bool inverse, DType dtype, const char* op) {
    check_rope(l.batch, l.seq, l.heads, l.head_dim, l.out_stride, l.in_stride, op);
    const std::int64_t tokens = l.batch * l.seq;
    if (tokens * l.heads * (l.head_dim / 2) == 0) return;
    require(l.head_dim / 2 <= kMaxHalf, op, "head_dim above 512");
    const auto blocks = static_cast<unsigned>(std::min<std::int64_t>(tokens, 1 << 20));
    with_float_type(dtype, op, [&](auto t) {
        using T = decltype(t);
        TUNE_LAUNCH(rope_kernel, blocks, kThreads, 0, stream)
        (static_cast<T*>(out), static_cast<const T*>(in), l, freq, inverse);
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
