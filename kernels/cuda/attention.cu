// Causal attention with materialized probabilities and grouped KV heads.
// Scores and products are cuBLASLt GEMMs batched over the query heads that
// share a KV head (the KV operand has batch stride 0); softmax and its
// backward are row kernels. One batch element at a time, so the fp32
// scratch is (H, S, S), not (B, H, S, S). AttentionKind::fused goes to the
// flash kernels (flash_attention.cu).
//
// Workspace: [GEMM workspace][scores or dP: (H, S, S) fp32][dS: (H, S, S) dtype]
//
// Known difference from the CPU backend (which keeps all of these in fp32):
// dS is stored in the storage dtype, because the dQ and dK GEMMs need both
// operands in one dtype, and dK, dV sum a group's heads by beta = 1 GEMMs
// into their 16-bit outputs, one rounding per head. In fp16 a large dS can
// overflow to inf where the CPU's does not; the loss scaler then skips the
// step. The self-test's attention cases measure the rest of the difference.
#include <math.h>

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

}  // namespace

std::uint64_t CudaBackend::attention_workspace_bytes(const AttentionShape& shape, AttentionKind kind,
                                                     DType dtype) const {
    if (kind == AttentionKind::fused) return workspace::cuda_flash_attention_bytes();
    static_assert(GemmLt::kWorkspaceBytes == workspace::kCudaGemmBytes, "carve() puts the GEMM workspace first");
    return workspace::cuda_attention_bytes(static_cast<std::uint64_t>(shape.heads),
                                           static_cast<std::uint64_t>(shape.seq), dtype_bytes(dtype));
}

void CudaBackend::attention_forward(const AttentionForwardArgs& a, Workspace ws) {
    const char* op = "attention_forward";
    const AttentionShape& sh = a.shape;
    check_attention(sh, a.kind, a.q_stride, a.k_stride, a.v_stride, op);
    check_attention_args(a, "cuda");
    if (a.kind == AttentionKind::fused) return flash_attention_forward(a);
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
            TUNE_LAUNCH(causal_softmax_kernel, static_cast<unsigned>(H * S), kThreads, 0, stream_)(static_cast<T*>(probs_b),
                                                                                         w.scores, S);
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
    if (a.kind == AttentionKind::fused) return flash_attention_backward(a);
    require(ws.ptr != nullptr && ws.bytes >= attention_workspace_bytes(sh, a.kind, a.dtype), op,
            "workspace smaller than attention_workspace_bytes()");
    const std::int64_t S = sh.seq, D = sh.head_dim, H = sh.heads, group = sh.heads / sh.kv_heads;
    const DType t = a.dtype;
    const float scale = 1.0f / sqrtf(static_cast<float>(D));
    const Scratch w = carve(sh, ws);
    for (std::int64_t b = 0; b < sh.batch; ++b) {
        const void* probs_b = at(a.probs, b * H * S * S, t);
        // Everything that reads dout first: dq may alias it.
        for (std::int64_t g = 0; g < sh.kv_heads; ++g) {
            // dP_h (S, S) = dO_h (S, D) V_g^T.
            GemmArgs dp = head_gemm(S, S, D, t, DType::f32);
            dp.trans_b = true;
            dp.a = at(a.dout, b * S * a.dout_stride + g * group * D, t), dp.lda = a.dout_stride, dp.stride_a = D;
            dp.b = at(a.v, b * S * a.v_stride + g * D, t), dp.ldb = a.v_stride, dp.stride_b = 0;
            dp.c = w.scores + g * group * S * S, dp.ldc = S, dp.stride_c = S * S;
            dp.batch = group;
            gemm_->run(dp, w.gemm);
            // dV_g (S, D) = sum over the group's heads of P_h^T dO_h.
            for (std::int64_t j = 0; j < group; ++j) {
                const std::int64_t h = g * group + j;
                GemmArgs dv = head_gemm(S, D, S, t, t);
                dv.trans_a = true;
                dv.a = at(probs_b, h * S * S, t), dv.lda = S;
                dv.b = at(a.dout, b * S * a.dout_stride + h * D, t), dv.ldb = a.dout_stride;
                dv.c = at(a.dv, b * S * a.v_stride + g * D, t), dv.ldc = a.v_stride;
                dv.beta = j == 0 ? 0.0f : 1.0f;
                gemm_->run(dv, w.gemm);
            }
        }
        with_float_type(t, op, [&](auto tag) {
            using T = decltype(tag);
            TUNE_LAUNCH(softmax_backward_kernel, static_cast<unsigned>(H * S), kThreads, 0, stream_)(
                static_cast<T*>(w.ds), static_cast<const T*>(probs_b), w.scores, S);
        });
        TUNE_CUDA_CHECK_LAUNCH("softmax_backward_kernel");
        for (std::int64_t g = 0; g < sh.kv_heads; ++g) {
            // dQ_h (S, D) = scale dS_h (S, S) K_g.
            GemmArgs dq = head_gemm(S, D, S, t, t);
            dq.alpha = scale;
            dq.a = at(w.ds, g * group * S * S, t), dq.lda = S, dq.stride_a = S * S;
            dq.b = at(a.k, b * S * a.k_stride + g * D, t), dq.ldb = a.k_stride, dq.stride_b = 0;
            dq.c = at(a.dq, b * S * a.q_stride + g * group * D, t), dq.ldc = a.q_stride, dq.stride_c = D;
            dq.batch = group;
            gemm_->run(dq, w.gemm);
            // dK_g (S, D) = scale * sum over the group's heads of dS_h^T Q_h.
            for (std::int64_t j = 0; j < group; ++j) {
                const std::int64_t h = g * group + j;
                GemmArgs dk = head_gemm(S, D, S, t, t);
                dk.trans_a = true;
                dk.alpha = scale;
                dk.a = at(w.ds, h * S * S, t), dk.lda = S;
                dk.b = at(a.q, b * S * a.q_stride + h * D, t), dk.ldb = a.q_stride;
                dk.c = at(a.dk, b * S * a.k_stride + g * D, t), dk.ldc = a.k_stride;
                dk.beta = j == 0 ? 0.0f : 1.0f;
                gemm_->run(dk, w.gemm);
            }
        }
    }
}

}  // namespace tune::kernels::cuda
