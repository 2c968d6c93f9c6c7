// Backend op arguments are checked once, above the backends
// (kernels/op_checks.h): the CPU backend refuses what the CUDA one refuses.
#include <catch2/catch.hpp>

#include <vector>

#include "kernels/cpu/cpu_backend.h"
#include "kernels/error.h"
#include "kernels/op_checks.h"

using namespace tune::kernels;
using tune::BackendError;

TEST_CASE("the CPU GEMM refuses batch matrices of C that overlap", "[cpu][checks]") {
    CpuBackend backend(CpuBackendOptions{1, 0});
    std::vector<float> a(64, 1.0f), b(64, 1.0f), c(64, 0.0f);
    GemmArgs g;
    g.m = 4, g.n = 4, g.k = 4;
    g.a = a.data(), g.lda = 4, g.stride_a = 16;
    g.b = b.data(), g.ldb = 4, g.stride_b = 16;
    g.c = c.data(), g.ldc = 4, g.stride_c = 2;  // batch 1's C starts inside batch 0's
    g.batch = 2;
    std::vector<float> ws(backend.gemm_workspace_bytes(g) / 4 + 1);
    CHECK_THROWS_WITH(backend.gemm(g, Workspace{ws.data(), ws.size() * 4}), Catch::Contains("overlap"));
    g.stride_c = 16;
    CHECK_NOTHROW(backend.gemm(g, Workspace{ws.data(), ws.size() * 4}));
}

TEST_CASE("a GEMM's c_in is C itself or apart from it", "[cpu][checks]") {
    CpuBackend backend(CpuBackendOptions{1, 0});
    std::vector<float> a(16, 1.0f), b(16, 1.0f), c(24, 0.0f);
    GemmArgs g;
    g.m = 4, g.n = 4, g.k = 4, g.beta = 1.0f;
    g.a = a.data(), g.lda = 4, g.b = b.data(), g.ldb = 4;
    g.c = c.data(), g.ldc = 4;
    std::vector<float> ws(backend.gemm_workspace_bytes(g) / 4 + 1);
    g.c_in = c.data() + 4;  // C's second row: read after the first is written
    CHECK_THROWS_WITH(backend.gemm(g, Workspace{ws.data(), ws.size() * 4}), Catch::Contains("c_in overlaps C"));
    g.c_in = c.data();
    CHECK_NOTHROW(backend.gemm(g, Workspace{ws.data(), ws.size() * 4}));
    std::vector<float> other(16, 2.0f);
    g.c_in = other.data();
    CHECK_NOTHROW(backend.gemm(g, Workspace{ws.data(), ws.size() * 4}));
    CHECK(c[0] == 6.0f);  // 2 + the product's 4
}

TEST_CASE("CPU attention forward requires the probabilities it keeps for backward", "[cpu][checks]") {
    CpuBackend backend(CpuBackendOptions{1, 0});
    const AttentionShape sh{1, 4, 2, 2, 8};
    std::vector<float> q(4 * 2 * 8), k(4 * 2 * 8), v(4 * 2 * 8), out(4 * 2 * 8);
    AttentionForwardArgs a;
    a.shape = sh;
    a.q = q.data(), a.k = k.data(), a.v = v.data(), a.out = out.data();
    a.q_stride = a.k_stride = a.v_stride = a.out_stride = 16;
    std::vector<float> ws(backend.attention_workspace_bytes(sh, AttentionKind::materialized, DType::f32) / 4 + 1);
    CHECK_THROWS_WITH(backend.attention_forward(a, Workspace{ws.data(), ws.size() * 4}), Catch::Contains("probs"));
}

TEST_CASE("the shared checks name the backend and the op", "[checks]") {
    GemmArgs g;
    g.m = -1;
    CHECK_THROWS_WITH(check_gemm_args(g, "cpu"), Catch::StartsWith("cpu backend: gemm:"));
    CHECK_THROWS_AS(check_rope_args(1, 1, 1, 3, 3, 3, "cuda", "rope_forward"), BackendError);
}
