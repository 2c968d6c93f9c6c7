// Argument checks of the CUDA backend's ops.
#include "kernels/cuda/host/shape_checks.h"

#include <string>

#include "kernels/error.h"

namespace tune::kernels::cuda {

void require(bool ok, const char* op, const char* what) {
    if (!ok) throw BackendError(std::string("cuda backend: ") + op + ": " + what);
}

void check_gemm_args(const GemmArgs& g) {
    const char* op = "gemm";
    require(g.m >= 0 && g.n >= 0 && g.k >= 0 && g.batch >= 1, op, "negative size or batch < 1");
    require(g.a_dtype == g.b_dtype && is_float(g.a_dtype), op, "A and B must share a float dtype");
    require(g.c_dtype == g.a_dtype || g.c_dtype == DType::f32, op, "C must be A's dtype or f32");
    require(g.lda >= (g.trans_a ? g.m : g.k) && g.lda >= 1, op, "lda smaller than A's row");
    require(g.ldb >= (g.trans_b ? g.k : g.n) && g.ldb >= 1, op, "ldb smaller than B's row");
    require(g.ldc >= g.n && g.ldc >= 1, op, "ldc smaller than C's row");
    // Batch matrices of C are disjoint, or interleaved column blocks of one matrix (attention's heads).
    const bool disjoint = g.stride_c >= g.m * g.ldc;
    const bool interleaved = g.stride_c >= g.n && (g.batch - 1) * g.stride_c + g.n <= g.ldc;
    require(g.batch == 1 || disjoint || interleaved, op, "batch matrices of C overlap");
}

void check_attention(const AttentionShape& sh, AttentionKind kind, std::int64_t qs, std::int64_t ks, std::int64_t vs,
                     const char* op) {
    require(kind == AttentionKind::materialized, op, "only materialized attention is implemented on CUDA");
    require(sh.batch > 0 && sh.seq > 0 && sh.head_dim > 0 && sh.kv_heads > 0 && sh.heads % sh.kv_heads == 0, op,
            "bad shape (heads must be a multiple of kv_heads)");
    require(sh.heads * sh.seq <= 0x7fffffff, op, "heads * seq exceeds 2^31 rows");
    require(qs >= sh.heads * sh.head_dim && ks >= sh.kv_heads * sh.head_dim && vs >= sh.kv_heads * sh.head_dim, op,
            "row stride smaller than the heads it holds");
}

void check_rope(std::int64_t batch, std::int64_t seq, std::int64_t heads, std::int64_t head_dim,
                std::int64_t out_stride, std::int64_t in_stride, const char* op) {
    require(head_dim > 0 && head_dim % 2 == 0, op, "head_dim must be even");
    require(batch >= 0 && seq >= 0 && heads >= 0, op, "bad shape");
    require(in_stride >= heads * head_dim && out_stride >= heads * head_dim, op,
            "row stride smaller than heads * head_dim");
}

}  // namespace tune::kernels::cuda
