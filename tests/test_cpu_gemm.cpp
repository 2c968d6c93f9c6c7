// CPU GEMM against a double-precision reference: transposes, leading
// dimensions, strided batches (and stride-0 broadcast), alpha/beta, and each
// storage dtype with fp32 accumulation.
#include <catch2/catch.hpp>

#include <cstdint>
#include <vector>

#include "kernels/cpu/cpu_backend.h"
#include "kernels/error.h"
#include "tests/backend_test_util.h"

using namespace tune::kernels;
using tune::testing::random_floats;
using tune::testing::rounded;

namespace {

struct Case {
    std::int64_t m, n, k, batch;
    bool ta, tb;
    float alpha, beta;
    bool broadcast_b;         // stride_b = 0
    std::int64_t pad;         // extra columns in every leading dimension
    bool separate_c = false;  // beta's C from GemmArgs::c_in; C starts as other values
};

// C_i = alpha op(A_i) op(B_i) + beta C_i in double, from the values as stored.
std::vector<double> reference(const Case& c, const std::vector<float>& a, std::int64_t lda, std::int64_t sa,
                              const std::vector<float>& b, std::int64_t ldb, std::int64_t sb,
                              const std::vector<float>& c0, std::int64_t ldc, std::int64_t sc) {
    std::vector<double> out(c0.begin(), c0.end());
    for (std::int64_t p = 0; p < c.batch; ++p)
        for (std::int64_t i = 0; i < c.m; ++i)
            for (std::int64_t j = 0; j < c.n; ++j) {
                double acc = 0;
                for (std::int64_t l = 0; l < c.k; ++l) {
                    const double x = c.ta ? a[p * sa + l * lda + i] : a[p * sa + i * lda + l];
                    const double y = c.tb ? b[p * sb + j * ldb + l] : b[p * sb + l * ldb + j];
                    acc += x * y;
                }
                double& dst = out[p * sc + i * ldc + j];
                dst = c.alpha * acc + c.beta * dst;
            }
    return out;
}

// Runs one case in dtype `ab` for A and B and `cd` for C; returns the max
// error relative to the largest reference value.
double run_case(const Case& c, DType ab, DType cd, int threads = 0) {
    CpuBackend backend(CpuBackendOptions{.threads = threads});
    const std::int64_t lda = (c.ta ? c.m : c.k) + c.pad, ldb = (c.tb ? c.k : c.n) + c.pad, ldc = c.n + c.pad;
    const std::int64_t sa = (c.ta ? c.k : c.m) * lda, sb = c.broadcast_b ? 0 : (c.tb ? c.n : c.k) * ldb, sc = c.m * ldc;
    const auto a = rounded(random_floats(static_cast<std::size_t>(sa * c.batch), 1), ab);
    const auto b = rounded(
        random_floats(static_cast<std::size_t>(c.broadcast_b ? (c.tb ? c.n : c.k) * ldb : sb * c.batch), 2), ab);
    const auto c0 = rounded(random_floats(static_cast<std::size_t>(sc * c.batch), 3), cd);
    const auto ref = reference(c, a, lda, sa, b, ldb, sb, c0, ldc, sc);

    // C as the GEMM finds it: c0, or other values inside the matrices where c0 comes in through c_in.
    std::vector<float> c_start = c0;
    for (std::int64_t p = 0; p < c.batch && c.separate_c; ++p)
        for (std::int64_t i = 0; i < c.m; ++i)
            for (std::int64_t j = 0; j < c.n; ++j) c_start[p * sc + i * ldc + j] = 7.0f;
    std::vector<std::uint16_t> a16, b16, c16, in16 = tune::testing::to_storage(c0, cd);
    std::vector<float> c32 = c_start, in32 = c0;
    GemmArgs g{.m = c.m,
               .n = c.n,
               .k = c.k,
               .trans_a = c.ta,
               .trans_b = c.tb,
               .a = a.data(),
               .lda = lda,
               .stride_a = sa,
               .b = b.data(),
               .ldb = ldb,
               .stride_b = sb,
               .c = c32.data(),
               .ldc = ldc,
               .stride_c = sc,
               .batch = c.batch,
               .alpha = c.alpha,
               .beta = c.beta,
               .a_dtype = ab,
               .b_dtype = ab,
               .c_dtype = cd};
    if (ab != DType::f32) {
        a16 = tune::testing::to_storage(a, ab);
        b16 = tune::testing::to_storage(b, ab);
        g.a = a16.data();
        g.b = b16.data();
    }
    if (cd != DType::f32) {
        c16 = tune::testing::to_storage(c_start, cd);
        g.c = c16.data();
    }
    if (c.separate_c) g.c_in = cd == DType::f32 ? static_cast<const void*>(in32.data()) : in16.data();
    std::vector<float> ws(backend.gemm_workspace_bytes(g) / 4 + 1);
    backend.gemm(g, Workspace{ws.data(), ws.size() * 4});
    const std::vector<float> got = cd == DType::f32 ? c32 : tune::testing::from_storage(c16, cd);
    // Padding columns of C must be untouched.
    for (std::int64_t p = 0; p < c.batch; ++p)
        for (std::int64_t i = 0; i < c.m; ++i)
            for (std::int64_t j = c.n; j < ldc; ++j)
                REQUIRE(got[p * sc + i * ldc + j] == c_start[p * sc + i * ldc + j]);
    // c_in is only read.
    if (c.separate_c) REQUIRE((cd == DType::f32 ? in32 : tune::testing::from_storage(in16, cd)) == c0);
    return tune::testing::rel_error(got, ref);
}

}  // namespace

TEST_CASE("cpu gemm: every transpose with padding, fp32 matches double", "[cpu][gemm]") {
    for (bool ta : {false, true})
        for (bool tb : {false, true}) {
            INFO("ta " << ta << " tb " << tb);
            CHECK(run_case({7, 5, 9, 1, ta, tb, 1.0f, 0.0f, false, 3}, DType::f32, DType::f32) < 1e-6);
        }
}

TEST_CASE("cpu gemm: strided batches, broadcast B, alpha and beta", "[cpu][gemm]") {
    CHECK(run_case({4, 6, 8, 3, false, true, 0.5f, 1.0f, false, 0}, DType::f32, DType::f32) < 1e-6);
    CHECK(run_case({4, 6, 8, 3, true, false, 2.0f, -1.0f, true, 2}, DType::f32, DType::f32) < 1e-6);
}

TEST_CASE("cpu gemm: 16-bit storage accumulates in fp32", "[cpu][gemm]") {
    for (DType t : {DType::bf16, DType::f16}) {
        INFO(dtype_name(t));
        // fp32 C: only the inputs are 16-bit, and the reference uses their stored values.
        CHECK(run_case({6, 5, 64, 2, false, true, 1.0f, 0.0f, false, 1}, t, DType::f32) < 1e-6);
        // 16-bit C (beta = 1, gradient accumulation): one rounding of the result.
        const double tol = t == DType::bf16 ? 8e-3 : 1e-3;
        CHECK(run_case({6, 5, 64, 2, true, false, 1.0f, 1.0f, false, 1}, t, t) < tol);
    }
}

TEST_CASE("cpu gemm: beta's C read from c_in, written to C, in every storage dtype", "[cpu][gemm]") {
    CHECK(run_case({5, 7, 9, 2, false, true, 1.0f, 1.0f, false, 2, true}, DType::f32, DType::f32) < 1e-6);
    CHECK(run_case({5, 7, 9, 1, true, false, 0.5f, -1.0f, false, 0, true}, DType::f32, DType::f32) < 1e-6);
    for (DType t : {DType::bf16, DType::f16}) {
        INFO(dtype_name(t));
        CHECK(run_case({6, 5, 64, 2, false, true, 1.0f, 1.0f, false, 1, true}, t, t) <
              (t == DType::bf16 ? 8e-3 : 1e-3));
    }
}

TEST_CASE("cpu gemm: workspace counts each 16-bit operand once", "[cpu][gemm]") {
    CpuBackend backend;
    GemmArgs g{.m = 4, .n = 3, .k = 5, .lda = 5, .ldb = 3, .stride_b = 0, .ldc = 3, .batch = 2};
    CHECK(backend.gemm_workspace_bytes(g) == 0);
    g.a_dtype = g.b_dtype = DType::bf16;
    g.stride_a = 20;
    // A: 2 batches of 4x5, B: one broadcast 5x3, C fp32: 0.
    CHECK(backend.gemm_workspace_bytes(g) == 4 * (2 * 20 + 15));
    g.c_dtype = DType::bf16;
    g.stride_c = 12;
    CHECK(backend.gemm_workspace_bytes(g) == 4 * (2 * 20 + 15 + 2 * 12));
    std::vector<std::uint16_t> a(40), b(15), c(24);
    g.a = a.data(), g.b = b.data(), g.c = c.data();
    std::vector<float> ws(10);
    CHECK_THROWS_AS(backend.gemm(g, Workspace{ws.data(), 40}), tune::BackendError);
    g.b_dtype = DType::f16;
    CHECK_THROWS_AS(backend.gemm(g, Workspace{}), tune::BackendError);
}

TEST_CASE("cpu gemm: large products split over threads along m or n", "[cpu][gemm]") {
    // Above the threshold where the backend cuts C into stripes per thread.
    CHECK(run_case({150, 40, 300, 1, false, true, 1.0f, 0.5f, false, 1}, DType::f32, DType::f32, 3) < 1e-6);
    CHECK(run_case({40, 150, 300, 2, true, false, 1.0f, 0.0f, false, 0}, DType::f32, DType::f32, 3) < 1e-6);
    CHECK(run_case({33, 170, 200, 1, true, true, 1.0f, 1.0f, false, 2}, DType::bf16, DType::bf16, 4) < 8e-3);
}

TEST_CASE("cpu gemm: rows beyond one sgemm call's block are computed block by block", "[cpu][gemm]") {
    // 4100 rows: three blocks of 1367, each one call (or split again over threads).
    CHECK(run_case({4100, 16, 40, 1, true, false, 1.0f, 0.5f, false, 1}, DType::f32, DType::f32, 2) < 1e-6);
    // Blocks narrower than C: each block striped along n over the threads.
    CHECK(run_case({4100, 2100, 3, 1, false, true, 1.0f, 1.0f, false, 0}, DType::f32, DType::f32, 2) < 1e-6);
    CHECK(run_case({2049, 24, 16, 2, true, false, 1.0f, 1.0f, false, 0}, DType::bf16, DType::bf16, 3) < 8e-3);
}
