// Causal attention with materialized probabilities and grouped KV heads
// (AttentionKind::materialized; the fused kind is cpu_flash_attention.cpp).
// Work is split over (batch, kv head) slabs on OpenMP threads, each calling
// single-threaded sgemm on (S, D) head blocks read in place through their
// row strides (fp32) or widened into the thread's scratch (bf16, fp16).
// (OpenBLAS runs single-threaded: see CpuBackend's constructor.)
#include <cblas.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <type_traits>

#include "kernels/cpu/cpu_backend.h"
#include "kernels/cpu/cpu_flash_attention.h"
#include "kernels/cpu/fast_exp.h"
#include "kernels/cpu/fp32_gemm.h"
#include "kernels/cpu/typed.h"
#include "kernels/cpu/vectorize.h"
#include "kernels/op_checks.h"
#include "kernels/workspace_bytes.h"

namespace tune::kernels {

namespace {

using cpu::Mat;
using cpu::mm;

// Rows of scores computed per GEMM: causal attention skips the column
// blocks above the diagonal, about half of the work for long sequences.
constexpr std::int64_t kRowBlock = 64;

// Per-thread scratch: two (S, S) and eight (S, D) blocks.
struct Scratch {
    float *p, *dp, *q, *k, *v, *o, *dq, *dk, *dv, *dout;

    Scratch(float* base, std::int64_t s, std::int64_t d) {
        p = base;
        dp = p + s * s;
        float* blocks[] = {nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr};
        for (int i = 0; i < 8; ++i) blocks[i] = dp + s * s + i * s * d;
        q = blocks[0], k = blocks[1], v = blocks[2], o = blocks[3];
        dq = blocks[4], dk = blocks[5], dv = blocks[6], dout = blocks[7];
    }
};

// The same for every dtype (fp32 leaves the (S, D) blocks and P unused), so
// the estimator needs one formula (workspace::cpu_eager_attention_bytes).
std::int64_t scratch_floats(const AttentionShape& sh, DType) {
    return static_cast<std::int64_t>(workspace::cpu_eager_attention_bytes(1, static_cast<std::uint64_t>(sh.seq),
                                                                          static_cast<std::uint64_t>(sh.head_dim)) /
                                     4);
}

// A head block (S rows, D columns, row stride `stride`) as fp32: in place for
// float storage, else widened into buf.
template <class T>
Mat read_head(const T* src, std::int64_t stride, std::int64_t s, std::int64_t d, float* buf) {
    if constexpr (std::is_same_v<T, float>) {
        return {const_cast<float*>(src), stride};
    } else {
        for (std::int64_t i = 0; i < s; ++i) cpu::load_run(src + i * stride, d, buf + i * d);
        return {buf, d};
    }
}

// Where an output head block is computed: in place for float storage, else buf.
template <class T>
Mat out_head(T* dst, std::int64_t stride, float* buf, std::int64_t d) {
    if constexpr (std::is_same_v<T, float>)
        return {dst, stride};
    else
        return {buf, d};
}

// Stores a computed block to its destination (a no-op when computed in place).
template <class T>
void write_head(T* dst, std::int64_t stride, Mat src, std::int64_t s, std::int64_t d) {
    if (static_cast<void*>(dst) == static_cast<void*>(src.p)) return;
    for (std::int64_t i = 0; i < s; ++i) cpu::store_run(dst + i * stride, d, src.p + i * src.ld);
}

// Causal softmax of rows [i0, i1) of the (S, S) scores, in place: row i
// keeps columns j <= i, the rest becomes 0 (never computed by the blocked GEMMs).
TUNE_CPU_CLONES void causal_softmax(float* p, std::int64_t s, std::int64_t i0, std::int64_t i1) {
    for (std::int64_t i = i0; i < i1; ++i) {
        float* row = p + i * s;
        const std::int64_t n = i + 1;
        const float mx = cpu::lane_max(row, n);
        for (std::int64_t j = 0; j < n; ++j) row[j] = cpu::exp_vec(row[j] - mx);
        const float inv = 1.0f / cpu::lane_sum(n, [&](std::int64_t j) { return row[j]; });
        for (std::int64_t j = 0; j < n; ++j) row[j] *= inv;
        for (std::int64_t j = n; j < s; ++j) row[j] = 0.0f;
    }
}

// dS = P * (dP - rowsum(P * dP)) for rows [i0, i1), in place in dp.
TUNE_CPU_CLONES void softmax_backward(const float* p, float* dp, std::int64_t s, std::int64_t i0, std::int64_t i1) {
    for (std::int64_t i = i0; i < i1; ++i) {
        const float* pr = p + i * s;
        float* dr = dp + i * s;
        const std::int64_t n = i + 1;
        const float dot = cpu::lane_sum(n, [&](std::int64_t j) { return pr[j] * dr[j]; });
        for (std::int64_t j = 0; j < n; ++j) dr[j] = pr[j] * (dr[j] - dot);
        for (std::int64_t j = n; j < s; ++j) dr[j] = 0.0f;
    }
}

// Rounds dS rows [i0, i1) through the storage dtype T before the dQ and dK
// products, as the CUDA backend (whose GEMMs take dS in T) and PyTorch's
// eager attention do: in fp16 a dS beyond 65504 overflows on every backend.
template <class T>
void round_ds_rows(float* ds, std::int64_t s, std::int64_t i0, std::int64_t i1) {
    if constexpr (!std::is_same_v<T, float>)
        for (std::int64_t i = i0; i < i1; ++i)
            for (std::int64_t j = 0; j <= i; ++j) ds[i * s + j] = math::to_float(math::from_float<T>(ds[i * s + j]));
}

// Rows of a matrix view, starting at row i.
Mat rows_from(Mat m, std::int64_t i) { return {m.p + i * m.ld, m.ld}; }

// Zeroes an (S, D) block held with leading dimension ld.
void zero_rows(Mat m, std::int64_t s, std::int64_t d) {
    for (std::int64_t i = 0; i < s; ++i) std::fill(m.p + i * m.ld, m.p + i * m.ld + d, 0.0f);
}

template <class T>
void forward_slab(const AttentionForwardArgs& a, std::int64_t b, std::int64_t g, Scratch& w) {
    const AttentionShape& sh = a.shape;
    const std::int64_t S = sh.seq, D = sh.head_dim, group = sh.heads / sh.kv_heads;
    const float scale = 1.0f / std::sqrt(static_cast<float>(D));
    const auto* q = static_cast<const T*>(a.q) + b * S * a.q_stride;
    const auto* k = static_cast<const T*>(a.k) + b * S * a.k_stride + g * D;
    const auto* v = static_cast<const T*>(a.v) + b * S * a.v_stride + g * D;
    auto* out = static_cast<T*>(a.out) + b * S * a.out_stride;
    const Mat K = read_head(k, a.k_stride, S, D, w.k), V = read_head(v, a.v_stride, S, D, w.v);
    for (std::int64_t h = g * group; h < (g + 1) * group; ++h) {
        T* probs = static_cast<T*>(a.probs) + (b * sh.heads + h) * S * S;
        const Mat Q = read_head(q + h * D, a.q_stride, S, D, w.q);
        const Mat P = out_head(probs, S, w.p, S);
        // Causal: row block [i0, i1) needs scores for columns [0, i1) only.
        for (std::int64_t i0 = 0; i0 < S; i0 += kRowBlock) {
            const std::int64_t i1 = std::min(S, i0 + kRowBlock);
            mm(false, true, i1 - i0, i1, D, scale, rows_from(Q, i0), K, 0.0f, rows_from(P, i0));
            causal_softmax(P.p, S, i0, i1);
        }
        if constexpr (!std::is_same_v<T, float>) {
            // Round once, and use the rounded probabilities backward will see.
            cpu::store_run(probs, S * S, P.p);
            cpu::load_run(probs, S * S, P.p);
        }
        const Mat O = out_head(out + h * D, a.out_stride, w.o, D);
        for (std::int64_t i0 = 0; i0 < S; i0 += kRowBlock) {
            const std::int64_t i1 = std::min(S, i0 + kRowBlock);
            mm(false, false, i1 - i0, D, i1, 1.0f, rows_from(P, i0), V, 0.0f, rows_from(O, i0));
        }
        write_head(out + h * D, a.out_stride, O, S, D);
    }
}

template <class T>
void backward_slab(const AttentionBackwardArgs& a, std::int64_t b, std::int64_t g, Scratch& w) {
    const AttentionShape& sh = a.shape;
    const std::int64_t S = sh.seq, D = sh.head_dim, group = sh.heads / sh.kv_heads;
    const float scale = 1.0f / std::sqrt(static_cast<float>(D));
    const auto* q = static_cast<const T*>(a.q) + b * S * a.q_stride;
    const auto* k = static_cast<const T*>(a.k) + b * S * a.k_stride + g * D;
    const auto* v = static_cast<const T*>(a.v) + b * S * a.v_stride + g * D;
    const auto* dout = static_cast<const T*>(a.dout) + b * S * a.dout_stride;
    auto* dq = static_cast<T*>(a.dq) + b * S * a.q_stride;
    auto* dk = static_cast<T*>(a.dk) + b * S * a.k_stride + g * D;
    auto* dv = static_cast<T*>(a.dv) + b * S * a.v_stride + g * D;
    const Mat K = read_head(k, a.k_stride, S, D, w.k), V = read_head(v, a.v_stride, S, D, w.v);
    const Mat dK = out_head(dk, a.k_stride, w.dk, D), dV = out_head(dv, a.v_stride, w.dv, D);
    zero_rows(dK, S, D);  // the group's heads and row blocks all add into dK, dV
    zero_rows(dV, S, D);
    const Mat dP{w.dp, S};
    for (std::int64_t h = g * group; h < (g + 1) * group; ++h) {
        const T* probs = static_cast<const T*>(a.probs) + (b * sh.heads + h) * S * S;
        const Mat P = read_head(probs, S, S, S, w.p);
        const Mat dO = read_head(dout + h * D, a.dout_stride, S, D, w.dout);
        const Mat Q = read_head(q + h * D, a.q_stride, S, D, w.q);
        const Mat dQ = out_head(dq + h * D, a.q_stride, w.dq, D);
        // Row block [i0, i1) of P, dP, dS is zero beyond column i1.
        for (std::int64_t i0 = 0; i0 < S; i0 += kRowBlock) {
            const std::int64_t i1 = std::min(S, i0 + kRowBlock), rows = i1 - i0;
            mm(true, false, i1, D, rows, 1.0f, rows_from(P, i0), rows_from(dO, i0), 1.0f, dV);  // dV += P^T dO
            mm(false, true, rows, i1, D, 1.0f, rows_from(dO, i0), V, 0.0f, rows_from(dP, i0));  // dP = dO V^T
            softmax_backward(P.p, dP.p, S, i0, i1);                                             // dP <- dS
            round_ds_rows<T>(dP.p, S, i0, i1);
            mm(false, false, rows, D, i1, scale, rows_from(dP, i0), K, 0.0f, rows_from(dQ, i0));  // dQ = scale dS K
            mm(true, false, i1, D, rows, scale, rows_from(dP, i0), rows_from(Q, i0), 1.0f, dK);   // dK += scale dS^T Q
        }
        write_head(dq + h * D, a.q_stride, dQ, S, D);
    }
    write_head(dk, a.k_stride, dK, S, D);
    write_head(dv, a.v_stride, dV, S, D);
}

// Runs body(b, g, scratch) for every (batch, kv head) slab on the OpenMP threads.
template <class Body>
void for_each_slab(const AttentionShape& sh, DType dtype, int threads, Workspace ws, Body&& body) {
    const std::int64_t slabs = sh.batch * sh.kv_heads;
    auto* base = static_cast<float*>(ws.ptr);
#pragma omp parallel for num_threads(threads) schedule(dynamic, 1)
    for (std::int64_t i = 0; i < slabs; ++i) {
        float* mine = base + omp_get_thread_num() * scratch_floats(sh, dtype);
        Scratch w(mine, sh.seq, sh.head_dim);
        body(i / sh.kv_heads, i % sh.kv_heads, w);
    }
}

}  // namespace

std::uint64_t CpuBackend::attention_workspace_bytes(const AttentionShape& shape, AttentionKind kind,
                                                    DType dtype) const {
    const auto threads = static_cast<std::uint64_t>(threads_);
    if (kind == AttentionKind::fused)
        return workspace::cpu_flash_attention_bytes(threads, static_cast<std::uint64_t>(shape.seq),
                                                    static_cast<std::uint64_t>(shape.head_dim));
    return 4 * static_cast<std::uint64_t>(scratch_floats(shape, dtype)) * threads;
}

void CpuBackend::attention_forward(const AttentionForwardArgs& a, Workspace ws) {
    check_attention_args(a, "cpu");
    cpu::require_workspace(ws.ptr, ws.bytes, attention_workspace_bytes(a.shape, a.kind, a.dtype), "attention_forward");
    if (a.kind == AttentionKind::fused) return cpu::flash_attention_forward(a, threads_, ws);
    cpu::with_float_type(a.dtype, [&](auto t) {
        using T = decltype(t);
        for_each_slab(a.shape, a.dtype, threads_, ws,
                      [&](std::int64_t b, std::int64_t g, Scratch& w) { forward_slab<T>(a, b, g, w); });
    });
}

void CpuBackend::attention_backward(const AttentionBackwardArgs& a, Workspace ws) {
    check_attention_args(a, "cpu");
    cpu::require_workspace(ws.ptr, ws.bytes, attention_workspace_bytes(a.shape, a.kind, a.dtype), "attention_backward");
    if (a.kind == AttentionKind::fused) return cpu::flash_attention_backward(a, threads_, ws);
    cpu::with_float_type(a.dtype, [&](auto t) {
        using T = decltype(t);
        for_each_slab(a.shape, a.dtype, threads_, ws,
                      [&](std::int64_t b, std::int64_t g, Scratch& w) { backward_slab<T>(a, b, g, w); });
    });
}

}  // namespace tune::kernels
