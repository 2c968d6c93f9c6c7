// Argument checks of the CUDA backend's ops: the checks every backend shares
// (kernels/op_checks.h), named as the CUDA sources and their tests call them.
#include "kernels/cuda/host/shape_checks.h"

#include <string>

#include "kernels/error.h"
#include "kernels/op_checks.h"

namespace tune::kernels::cuda {

void require(bool ok, const char* op, const char* what) { require_arg(ok, "cuda", op, what); }

void check_gemm_args(const GemmArgs& g) { kernels::check_gemm_args(g, "cuda"); }

void check_attention(const AttentionShape& sh, AttentionKind kind, std::int64_t qs, std::int64_t ks, std::int64_t vs,
                     const char* op) {
    check_attention_shape(sh, kind, qs, ks, vs, "cuda", op);
    require(sh.heads * sh.seq <= 0x7fffffff, op, "heads * seq exceeds 2^31 rows");  // a grid's limit
}

void check_rope(std::int64_t batch, std::int64_t seq, std::int64_t heads, std::int64_t head_dim,
                std::int64_t out_stride, std::int64_t in_stride, const char* op) {
    check_rope_args(batch, seq, heads, head_dim, out_stride, in_stride, "cuda", op);
}

}  // namespace tune::kernels::cuda
