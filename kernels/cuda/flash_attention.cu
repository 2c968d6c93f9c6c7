// Causal flash attention with grouped KV heads (AttentionKind::fused), in the
// order of kernels/cpu/cpu_flash_attention.cpp and with the online-softmax
// rules of kernels/math/online_softmax.h. bf16 and fp16 at head dims 64 and
// 128 go to the tensor-core kernels (flash_attention_tc.cu); the kernels
// here serve fp32 and the other head dims: tiles of kTile queries by kTile
// keys in shared memory as fp32, every product accumulated in fp32 on CUDA
// cores. No workspace.
//
//   forward:  one block per (query tile, head, batch): running max, sum and
//             (tile, D) accumulator; writes O and lse (B, H, S) fp32.
//   backward: one block per (key tile, kv head, batch) sums dK, dV over the
//             group's heads and the query tiles at or below the diagonal;
//             then one block per (query tile, head, batch) computes dQ (so
//             dQ may alias dO, and no two blocks write one gradient).
// Offsets are 64-bit: (b*S + i) * stride passes 2^31 at long contexts.
#include <math.h>

#include "kernels/cuda/cuda_backend.cuh"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/flash_attention.cuh"
#include "kernels/cuda/launch.cuh"
#include "kernels/math/online_softmax.h"
#include "kernels/op_checks.h"
#include "kernels/workspace_bytes.h"

namespace tune::kernels::cuda {

namespace {

constexpr int kTile = 16;         // queries and keys per tile
constexpr int kMaxHeadDim = 128;  // static shared memory: 4 (tile, D) fp32 blocks
constexpr int kFlashThreads = 128;
constexpr int kOwned = kTile * kMaxHeadDim / kFlashThreads;  // accumulator elements per thread

// rows x D elements of a (B, S, heads, D) tensor from row i0 of head h, into tile (ld D) as fp32; zero past S.
template <class T>
__device__ void load_tile(float* tile, const T* base, std::int64_t b, std::int64_t i0, std::int64_t stride,
                          std::int64_t head, const FlashArgs& a) {
    const std::int64_t D = a.head_dim;
    for (std::int64_t e = threadIdx.x; e < kTile * D; e += blockDim.x) {
        const std::int64_t r = e / D, c = e % D, i = i0 + r;
        tile[e] = i < a.seq ? load(base, (b * a.seq + i) * stride + head * D + c) : 0.0f;
    }
}

template <class T>
__device__ void store_tile(T* base, const float* tile, std::int64_t b, std::int64_t i0, std::int64_t stride,
                           std::int64_t head, const FlashArgs& a) {
    const std::int64_t D = a.head_dim;
    for (std::int64_t e = threadIdx.x; e < kTile * D; e += blockDim.x) {
        const std::int64_t r = e / D, c = e % D, i = i0 + r;
        if (i < a.seq) store(base, (b * a.seq + i) * stride + head * D + c, tile[e]);
    }
}

// s (tile, tile) = scale * A B^T over D, both (tile, D) in shared memory.
__device__ void scores(float* s, const float* A, const float* B, std::int64_t D, float scale) {
    for (int e = threadIdx.x; e < kTile * kTile; e += blockDim.x) {
        const int r = e / kTile, c = e % kTile;
        float acc = 0.0f;
        for (std::int64_t x = 0; x < D; ++x) acc += A[r * D + x] * B[c * D + x];
        s[e] = scale * acc;
    }
}

template <class T>
__global__ void flash_forward_kernel(FlashArgs a) {
    __shared__ float q[kTile * kMaxHeadDim], k[kTile * kMaxHeadDim], v[kTile * kMaxHeadDim], o[kTile * kMaxHeadDim];
    __shared__ float s[kTile * kTile], m[kTile], l[kTile], alpha[kTile];
    const std::int64_t i0 = static_cast<std::int64_t>(blockIdx.x) * kTile, h = blockIdx.y, b = blockIdx.z;
    const std::int64_t D = a.head_dim, g = h / (a.heads / a.kv_heads);
    load_tile(q, static_cast<const T*>(a.q), b, i0, a.q_stride, h, a);
    for (std::int64_t e = threadIdx.x; e < kTile * D; e += blockDim.x) o[e] = 0.0f;
    if (threadIdx.x < kTile) m[threadIdx.x] = -INFINITY, l[threadIdx.x] = 0.0f;
    const std::int64_t key_end = math::causal_key_end(i0 + kTile < a.seq ? i0 + kTile : a.seq);
    for (std::int64_t j0 = 0; j0 < key_end; j0 += kTile) {
        __syncthreads();  // the previous tile's k, v and s are consumed
        load_tile(k, static_cast<const T*>(a.k), b, j0, a.k_stride, g, a);
        load_tile(v, static_cast<const T*>(a.v), b, j0, a.v_stride, g, a);
        __syncthreads();
        scores(s, q, k, D, a.scale);
        __syncthreads();
        if (threadIdx.x < kTile) {  // the online softmax, one thread per query row
            const int r = threadIdx.x;
            const std::int64_t i = i0 + r;
            float tile_max = -INFINITY;
            for (int c = 0; c < kTile; ++c)
                if (j0 + c < a.seq && math::causal_visible(i, j0 + c)) tile_max = fmaxf(tile_max, s[r * kTile + c]);
            const float m_new = math::online_max(m[r], tile_max);
            // Rows past S see no key: keep them at zero (m stays -inf, nothing is exponentiated).
            const float a_r = m_new == -INFINITY ? 1.0f : math::online_rescale(m[r], m_new, DeviceExp{});
            float sum = 0.0f;
            for (int c = 0; c < kTile; ++c) {
                const bool seen = j0 + c < a.seq && math::causal_visible(i, j0 + c) && m_new != -INFINITY;
                const float p = seen ? expf(s[r * kTile + c] - m_new) : 0.0f;
                s[r * kTile + c] = p;
                sum += p;
            }
            l[r] = a_r * l[r] + sum;
            m[r] = m_new;
            alpha[r] = a_r;
        }
        __syncthreads();
        for (std::int64_t e = threadIdx.x; e < kTile * D; e += blockDim.x) {  // o = alpha o + P v
            const std::int64_t r = e / D, c = e % D;
            float acc = 0.0f;
            for (int x = 0; x < kTile; ++x) acc += s[r * kTile + x] * v[x * D + c];
            o[e] = alpha[r] * o[e] + acc;
        }
    }
    __syncthreads();
    for (std::int64_t e = threadIdx.x; e < kTile * D; e += blockDim.x) {
        const std::int64_t r = e / D;
        o[e] = l[r] > 0.0f ? o[e] * math::online_normalizer(l[r]) : 0.0f;
    }
    if (threadIdx.x < kTile && i0 + threadIdx.x < a.seq)
        a.lse[(b * a.heads + h) * a.seq + i0 + threadIdx.x] = math::online_lse(m[threadIdx.x], l[threadIdx.x]);
    __syncthreads();
    store_tile(static_cast<T*>(a.o), o, b, i0, a.out_stride, h, a);
}

// A query tile's q, dO, lse and D = rowsum(dO * O) into shared memory.
template <class T>
__device__ void load_query_tile(float* q, float* dout, float* lse, float* delta, std::int64_t b, std::int64_t h,
                                std::int64_t i0, const FlashArgs& a) {
    load_tile(q, static_cast<const T*>(a.q), b, i0, a.q_stride, h, a);
    load_tile(dout, static_cast<const T*>(a.dout), b, i0, a.dout_stride, h, a);
    if (threadIdx.x < kTile) {
        const std::int64_t i = i0 + threadIdx.x, D = a.head_dim;
        float d = 0.0f, x = 0.0f;
        if (i < a.seq) {
            const std::int64_t row_o = (b * a.seq + i) * a.out_stride + h * D;
            const std::int64_t row_g = (b * a.seq + i) * a.dout_stride + h * D;
            for (std::int64_t c = 0; c < D; ++c)
                d += load(static_cast<const T*>(a.dout), row_g + c) * load(static_cast<const T*>(a.out), row_o + c);
            x = a.lse_in[(b * a.heads + h) * a.seq + i];
        }
        delta[threadIdx.x] = d;
        lse[threadIdx.x] = x;
    }
}

// P (into p) and dS (into ds) of a (query tile i0, key tile j0) pair; masked and out-of-range entries 0.
__device__ void recompute_tile(float* p, float* ds, const float* q, const float* k, const float* v, const float* dout,
                               const float* lse, const float* delta, std::int64_t i0, std::int64_t j0,
                               const FlashArgs& a) {
    const std::int64_t D = a.head_dim;
    for (int e = threadIdx.x; e < kTile * kTile; e += blockDim.x) {
        const int r = e / kTile, c = e % kTile;
        const std::int64_t i = i0 + r, j = j0 + c;
        float pr = 0.0f, g = 0.0f;
        if (i < a.seq && j < a.seq && math::causal_visible(i, j)) {
            float sc = 0.0f, dp = 0.0f;
            for (std::int64_t x = 0; x < D; ++x) {
                sc += q[r * D + x] * k[c * D + x];
                dp += dout[r * D + x] * v[c * D + x];
            }
            pr = math::prob_from_lse(a.scale * sc, lse[r], DeviceExp{});
            g = math::softmax_score_grad(pr, dp, delta[r]);
        }
        p[e] = pr;
        ds[e] = g;
    }
}

template <class T>
__global__ void flash_key_grads_kernel(FlashArgs a) {
    __shared__ float q[kTile * kMaxHeadDim], k[kTile * kMaxHeadDim], v[kTile * kMaxHeadDim], dout[kTile * kMaxHeadDim];
    __shared__ float p[kTile * kTile], ds[kTile * kTile], lse[kTile], delta[kTile];
    const std::int64_t j0 = static_cast<std::int64_t>(blockIdx.x) * kTile, g = blockIdx.y, b = blockIdx.z;
    const std::int64_t D = a.head_dim, group = a.heads / a.kv_heads;
    load_tile(k, static_cast<const T*>(a.k), b, j0, a.k_stride, g, a);
    load_tile(v, static_cast<const T*>(a.v), b, j0, a.v_stride, g, a);
    float dk[kOwned], dv[kOwned];  // elements threadIdx.x + n * blockDim.x of the (tile, D) gradients
    for (int n = 0; n < kOwned; ++n) dk[n] = dv[n] = 0.0f;
    for (std::int64_t h = g * group; h < (g + 1) * group; ++h) {
        for (std::int64_t i0 = math::causal_query_begin(j0); i0 < a.seq; i0 += kTile) {
            __syncthreads();  // the previous pair's tiles are consumed
            load_query_tile<T>(q, dout, lse, delta, b, h, i0, a);
            __syncthreads();
            recompute_tile(p, ds, q, k, v, dout, lse, delta, i0, j0, a);
            __syncthreads();
            for (int n = 0; n < kOwned; ++n) {
                const std::int64_t e = threadIdx.x + static_cast<std::int64_t>(n) * blockDim.x;
                if (e >= kTile * D) break;
                const std::int64_t c = e / D, x = e % D;
                float sv = 0.0f, sk = 0.0f;
                for (int r = 0; r < kTile; ++r) {
                    sv += p[r * kTile + c] * dout[r * D + x];  // dV += P^T dO
                    sk += ds[r * kTile + c] * q[r * D + x];    // dK += dS^T Q
                }
                dv[n] += sv;
                dk[n] += a.scale * sk;
            }
        }
    }
    __syncthreads();
    // Stage each gradient through shared memory (q and dout are free now) to write it in the storage dtype.
    for (int n = 0; n < kOwned; ++n) {
        const std::int64_t e = threadIdx.x + static_cast<std::int64_t>(n) * blockDim.x;
        if (e < kTile * D) q[e] = dk[n], dout[e] = dv[n];
    }
    __syncthreads();
    store_tile(static_cast<T*>(a.dk), q, b, j0, a.k_stride, g, a);
    store_tile(static_cast<T*>(a.dv), dout, b, j0, a.v_stride, g, a);
}

template <class T>
__global__ void flash_query_grads_kernel(FlashArgs a) {
    __shared__ float q[kTile * kMaxHeadDim], k[kTile * kMaxHeadDim], v[kTile * kMaxHeadDim], dout[kTile * kMaxHeadDim];
    __shared__ float p[kTile * kTile], ds[kTile * kTile], lse[kTile], delta[kTile];
    const std::int64_t i0 = static_cast<std::int64_t>(blockIdx.x) * kTile, h = blockIdx.y, b = blockIdx.z;
    const std::int64_t D = a.head_dim, g = h / (a.heads / a.kv_heads);
    load_query_tile<T>(q, dout, lse, delta, b, h, i0, a);
    float dq[kOwned];
    for (int n = 0; n < kOwned; ++n) dq[n] = 0.0f;
    const std::int64_t key_end = math::causal_key_end(i0 + kTile < a.seq ? i0 + kTile : a.seq);
    for (std::int64_t j0 = 0; j0 < key_end; j0 += kTile) {
        __syncthreads();
        load_tile(k, static_cast<const T*>(a.k), b, j0, a.k_stride, g, a);
        load_tile(v, static_cast<const T*>(a.v), b, j0, a.v_stride, g, a);
        __syncthreads();
        recompute_tile(p, ds, q, k, v, dout, lse, delta, i0, j0, a);
        __syncthreads();
        for (int n = 0; n < kOwned; ++n) {
            const std::int64_t e = threadIdx.x + static_cast<std::int64_t>(n) * blockDim.x;
            if (e >= kTile * D) break;
            const std::int64_t r = e / D, x = e % D;
            float acc = 0.0f;
            for (int c = 0; c < kTile; ++c) acc += ds[r * kTile + c] * k[c * D + x];  // dQ += dS K
            dq[n] += a.scale * acc;
        }
    }
    __syncthreads();
    for (int n = 0; n < kOwned; ++n) {
        const std::int64_t e = threadIdx.x + static_cast<std::int64_t>(n) * blockDim.x;
        if (e < kTile * D) q[e] = dq[n];
    }
    __syncthreads();
    store_tile(static_cast<T*>(a.dq), q, b, i0, a.q_stride, h, a);
}

FlashArgs flash_args(const AttentionShape& sh) {
    FlashArgs f{};
    f.seq = sh.seq, f.heads = sh.heads, f.kv_heads = sh.kv_heads, f.head_dim = sh.head_dim;
    f.scale = 1.0f / sqrtf(static_cast<float>(sh.head_dim));
    return f;
}

dim3 tiles_grid(const AttentionShape& sh, std::int64_t heads) {
    return dim3(static_cast<unsigned>((sh.seq + kTile - 1) / kTile), static_cast<unsigned>(heads),
                static_cast<unsigned>(sh.batch));
}

void check_flash(const AttentionShape& sh, const char* op) {
    require(sh.head_dim <= kMaxHeadDim, op, "flash attention supports head_dim up to 128 on CUDA");
    require((sh.seq + kTile - 1) / kTile <= 0x7fffffff && sh.heads <= 65535 && sh.batch <= 65535, op,
            "flash attention grid too large (seq tiles, heads or batch)");
}

}  // namespace

void CudaBackend::flash_attention_forward(const AttentionForwardArgs& a) {
    const char* op = "attention_forward";
    check_flash(a.shape, op);
    FlashArgs f = flash_args(a.shape);
    f.q = a.q, f.k = a.k, f.v = a.v, f.o = a.out, f.lse = a.lse;
    f.q_stride = a.q_stride, f.k_stride = a.k_stride, f.v_stride = a.v_stride, f.out_stride = a.out_stride;
    if (flash_tensor_cores(a.dtype, a.shape.head_dim))
        return flash_forward_tensor_cores(f, a.dtype, a.shape.batch, stream_);
    with_float_type(a.dtype, op, [&](auto tag) {
        using T = decltype(tag);
        TUNE_LAUNCH(flash_forward_kernel<T>, tiles_grid(a.shape, a.shape.heads), kFlashThreads, 0, stream_)(f);
    });
    TUNE_CUDA_CHECK_LAUNCH("flash_forward_kernel");
}

void CudaBackend::flash_attention_backward(const AttentionBackwardArgs& a) {
    const char* op = "attention_backward";
    check_flash(a.shape, op);
    FlashArgs f = flash_args(a.shape);
    f.q = a.q, f.k = a.k, f.v = a.v, f.out = a.out, f.dout = a.dout, f.lse_in = a.lse;
    f.dq = a.dq, f.dk = a.dk, f.dv = a.dv;
    f.q_stride = a.q_stride, f.k_stride = a.k_stride, f.v_stride = a.v_stride;
    f.out_stride = a.out_stride, f.dout_stride = a.dout_stride;
    if (flash_tensor_cores(a.dtype, a.shape.head_dim))
        return flash_backward_tensor_cores(f, a.dtype, a.shape.batch, stream_);
    with_float_type(a.dtype, op, [&](auto tag) {
        using T = decltype(tag);
        // dK, dV first: dQ may alias dO, which every key tile reads.
        TUNE_LAUNCH(flash_key_grads_kernel<T>, tiles_grid(a.shape, a.shape.kv_heads), kFlashThreads, 0, stream_)(f);
        TUNE_CUDA_CHECK_LAUNCH("flash_key_grads_kernel");
        TUNE_LAUNCH(flash_query_grads_kernel<T>, tiles_grid(a.shape, a.shape.heads), kFlashThreads, 0, stream_)(f);
        TUNE_CUDA_CHECK_LAUNCH("flash_query_grads_kernel");
    });
}

}  // namespace tune::kernels::cuda
