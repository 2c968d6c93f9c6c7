// Causal attention with materialized probabilities and grouped KV heads.
// Scores and products are cuBLASLt GEMMs batched over the query heads that
// share a KV head (the KV operand has batch stride 0); softmax and its
// backward are row kernels. One batch element at a time, so the fp32
// scratch is (H, S, S), not (B, H, S, S). AttentionKind::fused goes to the
// flash kernels (flash_attention.cu).
//
// Workspace: [GEMM workspace][scores or dP: (H, S, S) fp32][dS: (H, S, S) dtype]
//
// Backward sums dK and dV over a group's heads in fp32 and rounds them to
// the storage dtype once, as the CPU backend does: after the softmax
// backward the dP region is free and holds the fp32 sums (KVH, S, cols), in
// column chunks when S is shorter than the head dim allows; fp32 storage is
// summed in place. dS itself is stored in the storage dtype (one rounding,
// not a sum), because the dQ and dK GEMMs need both operands in one dtype;
// the CPU backend rounds dS the same way (as PyTorch's eager attention
// does), so in fp16 a dS beyond 65504 overflows on both and the loss scaler
// skips the step on both.
#include <math.h>

#include <algorithm>

#include "kernels/cuda/cuda_backend.cuh"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/launch.cuh"
#include "kernels/cuda/reduce.cuh"
#include "kernels/op_checks.h"
#include "kernels/workspace_bytes.h"

namespace tune::kernels::cuda {

namespace {

struct Scratch {
    Workspace gemm;
    float* scores;  // (H, S, S) fp32: scores (forward) or dP (backward)
    void* ds;       // (H, S, S) dtype: dS (backward)
};

std::uint64_t square_bytes(const AttentionShape& s, std::uint64_t element) {
    return static_cast<std::uint64_t>(s.heads * s.seq * s.seq) * element;
}

Scratch carve(const AttentionShape& s, Workspace ws) {
    char* base = static_cast<char*>(ws.ptr);
    Scratch w;
    w.gemm = {base, GemmLt::kWorkspaceBytes};
    w.scores = reinterpret_cast<float*>(base + GemmLt::kWorkspaceBytes);
    w.ds = base + GemmLt::kWorkspaceBytes + workspace::aligned(square_bytes(s, 4));
    return w;
}

// Row (h, i) of the (H, S, S) fp32 scores -> probs in T: causal softmax,
// zeros above the diagonal. One block per row.
template <class T>
__global__ void causal_softmax_kernel(T* probs, const float* scores, std::int64_t seq) {
    __shared__ float shared[32];
    const std::int64_t row = blockIdx.x, i = row % seq;
    const float* x = scores + row * seq;
    T* p = probs + row * seq;
    float mx = -INFINITY;
    for (std::int64_t j = threadIdx.x; j <= i; j += blockDim.x) mx = fmaxf(mx, x[j]);
    mx = block_max(mx, shared);
    float sum = 0.0f;
    for (std::int64_t j = threadIdx.x; j <= i; j += blockDim.x) sum += expf(x[j] - mx);
    const float inv = 1.0f / block_sum(sum, shared);
    for (std::int64_t j = threadIdx.x; j < seq; j += blockDim.x) store(p, j, j <= i ? expf(x[j] - mx) * inv : 0.0f);
}

// dS = P * (dP - rowsum(P * dP)) per row (h, i), written in T; zeros above the diagonal.
template <class T>
__global__ void softmax_backward_kernel(T* ds, const T* probs, const float* dp, std::int64_t seq) {
    __shared__ float shared[32];
    const std::int64_t row = blockIdx.x, i = row % seq;
    const T* p = probs + row * seq;
    const float* d = dp + row * seq;
    float dot = 0.0f;
    for (std::int64_t j = threadIdx.x; j <= i; j += blockDim.x) dot += load(p, j) * d[j];
    dot = block_sum(dot, shared);
    T* out = ds + row * seq;
    for (std::int64_t j = threadIdx.x; j < seq; j += blockDim.x)
        store(out, j, j <= i ? load(p, j) * (d[j] - dot) : 0.0f);
}

// dst (blocks, rows, cols) with row stride ld and block stride `block` <-
// src (blocks, rows, cols) contiguous fp32, rounded once to T.
template <class T>
__global__ void store_blocks_kernel(T* dst, std::int64_t ld, std::int64_t block, const float* src, std::int64_t rows,
                                    std::int64_t cols, std::int64_t n) {
    TUNE_GRID_STRIDE(i, n) {
        const std::int64_t c = i % cols, r = (i / cols) % rows, blk = i / (cols * rows);
        store(dst, blk * block + r * ld + c, src[i]);
    }
}

// The GEMM argument block every attention product shares.
GemmArgs head_gemm(std::int64_t m, std::int64_t n, std::int64_t k, DType ab, DType c) {
    GemmArgs g;
    g.m = m, g.n = n, g.k = k;
    g.a_dtype = g.b_dtype = ab;
    g.c_dtype = c;
    return g;
}

std::uint64_t element_offset(std::int64_t elements, DType t) {
    return static_cast<std::uint64_t>(elements) * dtype_bytes(t);
}

const void* at(const void* p, std::int64_t elements, DType t) {
    return static_cast<const char*>(p) + element_offset(elements, t);
}
void* at(void* p, std::int64_t elements, DType t) { return static_cast<char*>(p) + element_offset(elements, t); }

// dX_g (S, D) = alpha * sum over the group's heads h of A_h^T (S, S) B_h (S, D),
// for every KV head g: dV (A = P, B = dO) and dK (A = dS, B = Q).
struct GroupSum {
    const void* a;  // (H, S, S) dtype, one batch element
    const void* b;  // (S, H, D) dtype, row stride ldb
    std::int64_t ldb;
    void* out;  // (S, KVH, D) dtype, overwritten, row stride ld_out
    std::int64_t ld_out;
    float alpha;
};

// Sums in fp32 with beta = 1 GEMMs batched over the KV heads: into `out` for
// fp32 storage, else into `acc` (the free (H, S, S) fp32 dP region) one
// column chunk of every KV head at a time, each chunk rounded once.
void sum_over_group(GemmLt& gemm, cudaStream_t stream, const AttentionShape& sh, DType t, const GroupSum& s, float* acc,
                    Workspace gemm_ws) {
    const std::int64_t S = sh.seq, D = sh.head_dim, KV = sh.kv_heads, group = sh.heads / sh.kv_heads;
    const bool in_place = t == DType::f32;
    const std::int64_t cols = in_place ? D : std::min(D, group * S);  // KV * S * cols <= H * S * S
    for (std::int64_t c0 = 0; c0 < D; c0 += cols) {
        const std::int64_t n = std::min(cols, D - c0);
        for (std::int64_t j = 0; j < group; ++j) {
            GemmArgs g = head_gemm(S, n, S, t, DType::f32);
            g.trans_a = true;
            g.alpha = s.alpha;
            g.beta = j == 0 ? 0.0f : 1.0f;
            g.a = at(s.a, j * S * S, t), g.lda = S, g.stride_a = group * S * S;
            g.b = at(s.b, j * D + c0, t), g.ldb = s.ldb, g.stride_b = group * D;
            if (in_place)
                g.c = at(s.out, c0, t), g.ldc = s.ld_out, g.stride_c = D;
            else
                g.c = acc, g.ldc = n, g.stride_c = S * n;
            g.batch = KV;
            gemm.run(g, gemm_ws);
        }
        if (in_place) continue;
        with_float_type(t, "attention_backward", [&](auto tag) {
            using T = decltype(tag);
            TUNE_LAUNCH(store_blocks_kernel, grid_for(KV * S * n), kThreads, 0, stream)
            (static_cast<T*>(at(s.out, c0, t)), s.ld_out, D, acc, S, n, KV * S * n);
        });
        TUNE_CUDA_CHECK_LAUNCH("store_blocks_kernel");
    }
}

}  // namespace

std::uint64_t CudaBackend::attention_workspace_bytes(const AttentionShape& shape, AttentionKind kind,
                                                     DType dtype) const {
    if (kind == AttentionKind::fused)
        return workspace::cuda_flash_attention_bytes(
            static_cast<std::uint64_t>(shape.batch), static_cast<std::uint64_t>(shape.heads),
            static_cast<std::uint64_t>(shape.seq), static_cast<std::uint64_t>(shape.head_dim), dtype_bytes(dtype));
    static_assert(GemmLt::kWorkspaceBytes == workspace::kCudaGemmBytes, "carve() puts the GEMM workspace first");
    return workspace::cuda_attention_bytes(static_cast<std::uint64_t>(shape.heads),
                                           static_cast<std::uint64_t>(shape.seq), dtype_bytes(dtype));
}

void CudaBackend::attention_forward(const AttentionForwardArgs& a, Workspace ws) {
    const char* op = "attention_forward";
    const AttentionShape& sh = a.shape;
    check_attention(sh, a.kind, a.q_stride, a.k_stride, a.v_stride, op);
    check_attention_args(a, "cuda");
    if (a.kind == AttentionKind::fused) {
        if (cudnn_ && cudnn_->forward(a, ws)) return;
        return flash_attention_forward(a);
    }
    require(ws.ptr != nullptr && ws.bytes >= attention_workspace_bytes(sh, a.kind, a.dtype), op,
            "workspace smaller than attention_workspace_bytes()");
    const std::int64_t S = sh.seq, D = sh.head_dim, H = sh.heads, group = sh.heads / sh.kv_heads;
    const DType t = a.dtype;
    const Scratch w = carve(sh, ws);
    for (std::int64_t b = 0; b < sh.batch; ++b) {
        for (std::int64_t g = 0; g < sh.kv_heads; ++g) {
            // scores[h] (S, S) = Q_h (S, D) K_g^T / sqrt(D), for the group's heads h.
            GemmArgs s = head_gemm(S, S, D, t, DType::f32);
            s.trans_b = true;
            s.alpha = 1.0f / sqrtf(static_cast<float>(D));
            s.a = at(a.q, b * S * a.q_stride + g * group * D, t), s.lda = a.q_stride, s.stride_a = D;
            s.b = at(a.k, b * S * a.k_stride + g * D, t), s.ldb = a.k_stride, s.stride_b = 0;
            s.c = w.scores + g * group * S * S, s.ldc = S, s.stride_c = S * S;
            s.batch = group;
            gemm_->run(s, w.gemm);
        }
        void* probs_b = at(a.probs, b * H * S * S, t);
        with_float_type(t, op, [&](auto tag) {
            using T = decltype(tag);
            TUNE_LAUNCH(causal_softmax_kernel, static_cast<unsigned>(H * S), kThreads, 0, stream_)
            (static_cast<T*>(probs_b), w.scores, S);
        });
        TUNE_CUDA_CHECK_LAUNCH("causal_softmax_kernel");
        for (std::int64_t g = 0; g < sh.kv_heads; ++g) {
            // out_h (S, D) = P_h (S, S) V_g (S, D).
            GemmArgs o = head_gemm(S, D, S, t, t);
            o.a = at(probs_b, g * group * S * S, t), o.lda = S, o.stride_a = S * S;
            o.b = at(a.v, b * S * a.v_stride + g * D, t), o.ldb = a.v_stride, o.stride_b = 0;
            o.c = at(a.out, b * S * a.out_stride + g * group * D, t), o.ldc = a.out_stride, o.stride_c = D;
            o.batch = group;
            gemm_->run(o, w.gemm);
        }
    }
}

void CudaBackend::attention_backward(const AttentionBackwardArgs& a, Workspace ws) {
    const char* op = "attention_backward";
    const AttentionShape& sh = a.shape;
    check_attention(sh, a.kind, a.q_stride, a.k_stride, a.v_stride, op);
    check_attention_args(a, "cuda");
    if (a.kind == AttentionKind::fused) {
        if (cudnn_ && cudnn_->backward(a, ws)) return;
        return flash_attention_backward(a);
    }
    require(ws.ptr != nullptr && ws.bytes >= attention_workspace_bytes(sh, a.kind, a.dtype), op,
            "workspace smaller than attention_workspace_bytes()");
    const std::int64_t S = sh.seq, D = sh.head_dim, H = sh.heads, group = sh.heads / sh.kv_heads;
    const DType t = a.dtype;
    const float scale = 1.0f / sqrtf(static_cast<float>(D));
    const Scratch w = carve(sh, ws);
    for (std::int64_t b = 0; b < sh.batch; ++b) {
        const void* probs_b = at(a.probs, b * H * S * S, t);
        const void* dout_b = at(a.dout, b * S * a.dout_stride, t);
        for (std::int64_t g = 0; g < sh.kv_heads; ++g) {
            // dP_h (S, S) = dO_h (S, D) V_g^T.
            GemmArgs dp = head_gemm(S, S, D, t, DType::f32);
            dp.trans_b = true;
            dp.a = at(dout_b, g * group * D, t), dp.lda = a.dout_stride, dp.stride_a = D;
            dp.b = at(a.v, b * S * a.v_stride + g * D, t), dp.ldb = a.v_stride, dp.stride_b = 0;
            dp.c = w.scores + g * group * S * S, dp.ldc = S, dp.stride_c = S * S;
            dp.batch = group;
            gemm_->run(dp, w.gemm);
        }
        with_float_type(t, op, [&](auto tag) {
            using T = decltype(tag);
            TUNE_LAUNCH(softmax_backward_kernel, static_cast<unsigned>(H * S), kThreads, 0, stream_)
            (static_cast<T*>(w.ds), static_cast<const T*>(probs_b), w.scores, S);
        });
        TUNE_CUDA_CHECK_LAUNCH("softmax_backward_kernel");
        // dP is consumed: its region sums dV, then dK. dV reads dout, so it
        // comes before dQ (dq may alias dout).
        sum_over_group(*gemm_, stream_, sh, t,
                       {probs_b, dout_b, a.dout_stride, at(a.dv, b * S * a.v_stride, t), a.v_stride, 1.0f}, w.scores,
                       w.gemm);
        for (std::int64_t g = 0; g < sh.kv_heads; ++g) {
            // dQ_h (S, D) = scale dS_h (S, S) K_g.
            GemmArgs dq = head_gemm(S, D, S, t, t);
            dq.alpha = scale;
            dq.a = at(w.ds, g * group * S * S, t), dq.lda = S, dq.stride_a = S * S;
            dq.b = at(a.k, b * S * a.k_stride + g * D, t), dq.ldb = a.k_stride, dq.stride_b = 0;
            dq.c = at(a.dq, b * S * a.q_stride + g * group * D, t), dq.ldc = a.q_stride, dq.stride_c = D;
            dq.batch = group;
            gemm_->run(dq, w.gemm);
        }
        sum_over_group(
            *gemm_, stream_, sh, t,
            {w.ds, at(a.q, b * S * a.q_stride, t), a.q_stride, at(a.dk, b * S * a.k_stride, t), a.k_stride, scale},
            w.scores, w.gemm);
    }
}

}  // namespace tune::kernels::cuda
