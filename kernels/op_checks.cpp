#include "kernels/op_checks.h"

#include <string>

#include "kernels/error.h"

namespace tune::kernels {

void require_arg(bool ok, std::string_view backend, std::string_view op, std::string_view what) {
    if (!ok) throw BackendError(std::string(backend) + " backend: " + std::string(op) + ": " + std::string(what));
}

namespace {

// Bytes of (rows, cols) stored row-major with leading dimension ld, strided over the batch.
std::uint64_t stored_bytes(std::int64_t rows, std::int64_t cols, std::int64_t ld, std::int64_t stride,
                           std::int64_t batch, DType t) {
    if (rows == 0 || cols == 0) return 0;
    const std::int64_t extent = (stride > 0 ? (batch - 1) * stride : 0) + (rows - 1) * ld + cols;
    return static_cast<std::uint64_t>(extent) * dtype_bytes(t);
}

}  // namespace

std::uint64_t gemm_a_bytes(const GemmArgs& g) {
    return g.trans_a ? stored_bytes(g.k, g.m, g.lda, g.stride_a, g.batch, g.a_dtype)
                     : stored_bytes(g.m, g.k, g.lda, g.stride_a, g.batch, g.a_dtype);
}

std::uint64_t gemm_b_bytes(const GemmArgs& g) {
    return g.trans_b ? stored_bytes(g.n, g.k, g.ldb, g.stride_b, g.batch, g.b_dtype)
                     : stored_bytes(g.k, g.n, g.ldb, g.stride_b, g.batch, g.b_dtype);
}

std::uint64_t gemm_c_bytes(const GemmArgs& g) { return stored_bytes(g.m, g.n, g.ldc, g.stride_c, g.batch, g.c_dtype); }

bool disjoint(const void* x, std::uint64_t x_bytes, const void* y, std::uint64_t y_bytes) {
    const auto a = reinterpret_cast<std::uintptr_t>(x), b = reinterpret_cast<std::uintptr_t>(y);
    return a + x_bytes <= b || b + y_bytes <= a;
}

void check_gemm_args(const GemmArgs& g, std::string_view backend) {
    auto require = [&](bool ok, std::string_view what) { require_arg(ok, backend, "gemm", what); };
    require(g.m >= 0 && g.n >= 0 && g.k >= 0 && g.batch >= 1, "negative size or batch < 1");
    require(g.a_dtype == g.b_dtype && is_float(g.a_dtype), "A and B must share a float dtype");
    require(g.c_dtype == g.a_dtype || g.c_dtype == DType::f32, "C must be A's dtype or f32");
    require(g.lda >= (g.trans_a ? g.m : g.k) && g.lda >= 1, "lda smaller than A's row");
    require(g.ldb >= (g.trans_b ? g.k : g.n) && g.ldb >= 1, "ldb smaller than B's row");
    require(g.ldc >= g.n && g.ldc >= 1, "ldc smaller than C's row");
    // Batch matrices of C are disjoint, or interleaved column blocks of one
    // matrix (attention's heads); anything else makes batches race on C.
    const bool disjoint = g.stride_c >= g.m * g.ldc;
    const bool interleaved = g.stride_c >= g.n && (g.batch - 1) * g.stride_c + g.n <= g.ldc;
    require(g.batch == 1 || disjoint || interleaved, "batch matrices of C overlap");
    const std::uint64_t c_bytes = gemm_c_bytes(g);
    require(g.c_in == nullptr || g.c_in == g.c || kernels::disjoint(g.c, c_bytes, g.c_in, c_bytes),
            "c_in overlaps C without being C");
}

void check_attention_shape(const AttentionShape& sh, AttentionKind, std::int64_t qs, std::int64_t ks, std::int64_t vs,
                           std::string_view backend, std::string_view op) {
    require_arg(sh.batch > 0 && sh.seq > 0 && sh.head_dim > 0 && sh.kv_heads > 0 && sh.heads % sh.kv_heads == 0,
                backend, op, "bad shape (heads must be a multiple of kv_heads)");
    require_arg(qs >= sh.heads * sh.head_dim && ks >= sh.kv_heads * sh.head_dim && vs >= sh.kv_heads * sh.head_dim,
                backend, op, "row stride smaller than the heads it holds");
}

void check_attention_args(const AttentionForwardArgs& a, std::string_view backend) {
    constexpr std::string_view op = "attention_forward";
    check_attention_shape(a.shape, a.kind, a.q_stride, a.k_stride, a.v_stride, backend, op);
    require_arg(a.out_stride >= a.shape.heads * a.shape.head_dim, backend, op, "out row stride too small");
    if (a.kind == AttentionKind::fused)
        require_arg(a.lse != nullptr, backend, op, "lse is required (fused attention keeps it)");
    else
        require_arg(a.probs != nullptr, backend, op, "probs are required (materialized attention keeps them)");
}

void check_attention_args(const AttentionBackwardArgs& a, std::string_view backend) {
    constexpr std::string_view op = "attention_backward";
    check_attention_shape(a.shape, a.kind, a.q_stride, a.k_stride, a.v_stride, backend, op);
    require_arg(a.dout_stride >= a.shape.heads * a.shape.head_dim, backend, op, "dout row stride too small");
    if (a.kind == AttentionKind::fused) {
        require_arg(a.lse != nullptr && a.out != nullptr, backend, op,
                    "out and lse are required (fused attention recomputes from them)");
        require_arg(a.out_stride >= a.shape.heads * a.shape.head_dim, backend, op, "out row stride too small");
    } else {
        require_arg(a.probs != nullptr, backend, op, "probs are required (materialized attention keeps them)");
    }
}

void check_rope_args(std::int64_t batch, std::int64_t seq, std::int64_t heads, std::int64_t head_dim,
                     std::int64_t out_stride, std::int64_t in_stride, std::string_view backend, std::string_view op) {
    require_arg(head_dim > 0 && head_dim % 2 == 0, backend, op, "head_dim must be even");
    require_arg(batch >= 0 && seq >= 0 && heads >= 0, backend, op, "bad shape");
    require_arg(in_stride >= heads * head_dim && out_stride >= heads * head_dim, backend, op,
                "row stride smaller than heads * head_dim");
}

void check_undecayed(const ParamTensor& t, std::string_view backend, std::string_view op) {
    require_arg(t.undecayed_count >= 0 && (t.undecayed_count == 0 || t.undecayed != nullptr), backend, op,
                "undecayed ranges missing");
    std::int64_t end = 0;
    for (std::int64_t k = 0; k < t.undecayed_count; ++k) {
        const ElementRange r = t.undecayed[k];
        require_arg(r.begin >= end && r.end > r.begin && r.end <= t.n, backend, op,
                    "undecayed ranges must be non-empty, sorted, disjoint and inside the tensor");
        end = r.end;
    }
}

void check_single_tensor(const ParamTensor& t, std::string_view backend, std::string_view op) {
    require_arg(t.undecayed_count == 0, backend, op, "takes one tensor per call, not a run with undecayed ranges");
}

}  // namespace tune::kernels
