// The CUDA backend's argument checks (GEMM, attention, RoPE): plain C++,
// run without a GPU; a bad call must raise BackendError naming the op.
#include <catch2/catch.hpp>

#include "kernels/cuda/host/shape_checks.h"
#include "kernels/error.h"

using namespace tune::kernels;
using tune::BackendError;
using tune::kernels::cuda::check_attention;
using tune::kernels::cuda::check_gemm_args;
using tune::kernels::cuda::check_rope;

namespace {

GemmArgs valid_gemm() {
    GemmArgs g;
    g.m = 8, g.n = 6, g.k = 4;
    g.lda = 4, g.ldb = 6, g.ldc = 6;
    return g;
}

}  // namespace

TEST_CASE("valid GEMMs pass, including transposes and 16-bit operands with fp32 C") {
    CHECK_NOTHROW(check_gemm_args(valid_gemm()));
    GemmArgs t = valid_gemm();
    t.trans_a = true, t.lda = 8, t.trans_b = true, t.ldb = 4;
    CHECK_NOTHROW(check_gemm_args(t));
    GemmArgs mixed = valid_gemm();
    mixed.a_dtype = mixed.b_dtype = DType::bf16, mixed.c_dtype = DType::f32;
    CHECK_NOTHROW(check_gemm_args(mixed));
}

TEST_CASE("GEMM dtype combinations the interface does not allow are refused") {
    GemmArgs g = valid_gemm();
    g.a_dtype = DType::bf16;  // B stays f32
    CHECK_THROWS_WITH(check_gemm_args(g), Catch::Contains("gemm") && Catch::Contains("share a float dtype"));
    g = valid_gemm();
    g.a_dtype = g.b_dtype = DType::f32, g.c_dtype = DType::bf16;
    CHECK_THROWS_AS(check_gemm_args(g), BackendError);
    g = valid_gemm();
    g.a_dtype = g.b_dtype = DType::u8;
    CHECK_THROWS_AS(check_gemm_args(g), BackendError);
}

TEST_CASE("leading dimensions must hold a row") {
    GemmArgs g = valid_gemm();
    g.lda = 3;
    CHECK_THROWS_WITH(check_gemm_args(g), Catch::Contains("lda"));
    g = valid_gemm();
    g.trans_b = true;  // B is (n, k): ldb must be >= k = 4, and 6 is fine
    CHECK_NOTHROW(check_gemm_args(g));
    g.ldb = 3;
    CHECK_THROWS_WITH(check_gemm_args(g), Catch::Contains("ldb"));
    g = valid_gemm();
    g.ldc = 5;
    CHECK_THROWS_WITH(check_gemm_args(g), Catch::Contains("ldc"));
}

TEST_CASE("batched C may be disjoint matrices or interleaved head blocks, never overlapping") {
    GemmArgs g = valid_gemm();
    g.batch = 3, g.stride_c = 8 * 6;  // disjoint
    CHECK_NOTHROW(check_gemm_args(g));
    g.ldc = 3 * 6, g.stride_c = 6;  // three (8, 6) blocks side by side in an (8, 18) matrix
    CHECK_NOTHROW(check_gemm_args(g));
    g.stride_c = 5;  // blocks overlap by a column
    CHECK_THROWS_WITH(check_gemm_args(g), Catch::Contains("overlap"));
    g.stride_c = 0;
    CHECK_THROWS_AS(check_gemm_args(g), BackendError);
}

TEST_CASE("attention shape checks") {
    const AttentionShape ok{2, 16, 8, 2, 64};
    CHECK_NOTHROW(check_attention(ok, AttentionKind::materialized, 8 * 64, 2 * 64, 2 * 64, "attention_forward"));
    CHECK_NOTHROW(check_attention(ok, AttentionKind::fused, 8 * 64, 2 * 64, 2 * 64, "attention_forward"));
    CHECK_THROWS_WITH(check_attention(ok, AttentionKind::materialized, 8 * 64, 2 * 64 - 1, 2 * 64, "attention_forward"),
                      Catch::Contains("attention_forward") && Catch::Contains("row stride"));
    const AttentionShape uneven{2, 16, 6, 4, 64};
    CHECK_THROWS_WITH(check_attention(uneven, AttentionKind::materialized, 6 * 64, 4 * 64, 4 * 64, "a"),
                      Catch::Contains("multiple of kv_heads"));
    CHECK_THROWS_WITH(check_attention(ok, AttentionKind::materialized, 8 * 64 - 1, 2 * 64, 2 * 64, "a"),
                      Catch::Contains("row stride"));
}

TEST_CASE("rope shape checks") {
    CHECK_NOTHROW(check_rope(2, 8, 4, 64, 256, 256 + 128, "rope_forward"));
    CHECK_THROWS_WITH(check_rope(2, 8, 4, 63, 252, 252, "rope_forward"), Catch::Contains("even"));
    CHECK_THROWS_WITH(check_rope(2, 8, 4, 64, 255, 256, "rope_backward"),
                      Catch::Contains("rope_backward") && Catch::Contains("stride"));
}
