// The flash attention tiles' products (kernels/cpu/tile_gemm.h) against a
// double-precision reference: plain and transposed A, full register blocks
// and ragged edges, leading dimensions wider than the matrices, beta 0
// (C never read: it starts as NaN) and beta 1 (accumulate).
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <vector>

#include "kernels/cpu/tile_gemm.h"
#include "tests/backend_test_util.h"

using tune::kernels::cpu::Mat;
using tune::kernels::cpu::runnable_tile_isas;
using tune::kernels::cpu::tile_mm;
using tune::kernels::cpu::tile_mm_on;
using tune::kernels::cpu::TileIsa;
using tune::testing::random_floats;

namespace {

struct Shape {
    std::int64_t m, n, k;
};

// isa empty: tile_mm's own choice.
void check_against_reference(std::optional<TileIsa> isa, bool ta, Shape s, float beta) {
    const std::int64_t pad = 3;  // every leading dimension is wider than its rows
    const std::int64_t a_rows = ta ? s.k : s.m, a_cols = ta ? s.m : s.k;
    const std::int64_t lda = a_cols + pad, ldb = s.n + pad, ldc = s.n + pad;
    const auto a = random_floats(a_rows * lda, 11), b = random_floats(s.k * ldb, 12);
    const auto c0 = random_floats(s.m * ldc, 13);
    std::vector<float> c = beta == 0.0f ? std::vector<float>(c0.size(), std::numeric_limits<float>::quiet_NaN()) : c0;
    const float alpha = 0.75f;
    const Mat ma{const_cast<float*>(a.data()), lda}, mb{const_cast<float*>(b.data()), ldb}, mc{c.data(), ldc};
    if (isa)
        tile_mm_on(*isa, ta, s.m, s.n, s.k, alpha, ma, mb, beta, mc);
    else
        tile_mm(ta, s.m, s.n, s.k, alpha, ma, mb, beta, mc);
    double worst = 0;
    for (std::int64_t i = 0; i < s.m; ++i)
        for (std::int64_t j = 0; j < s.n; ++j) {
            double sum = 0;
            for (std::int64_t p = 0; p < s.k; ++p) sum += double{ta ? a[p * lda + i] : a[i * lda + p]} * b[p * ldb + j];
            const double want = alpha * sum + (beta == 0.0f ? 0.0 : double{beta} * c0[i * ldc + j]);
            worst = std::max(worst, std::abs(c[i * ldc + j] - want) / (1.0 + std::abs(want)));
        }
    INFO((isa ? to_string(*isa) : "tile_mm")
         << " ta " << ta << " m " << s.m << " n " << s.n << " k " << s.k << " beta " << beta);
    CHECK(worst < 1e-5);
    // Nothing beyond the n columns of each row is written.
    for (std::int64_t i = 0; i < s.m; ++i)
        for (std::int64_t j = s.n; j < ldc; ++j)
            if (beta != 0.0f)
                REQUIRE(c[i * ldc + j] == c0[i * ldc + j]);
            else
                REQUIRE(std::isnan(c[i * ldc + j]));
}

}  // namespace

TEST_CASE("cpu tile products match a double reference, blocks and ragged edges", "[cpu][attention][flash]") {
    // Every variant this CPU runs, not only the widest: another machine picks another one.
    std::vector<std::optional<TileIsa>> variants{std::nullopt};
    for (TileIsa isa : runnable_tile_isas()) variants.emplace_back(isa);
    CHECK(variants.size() >= 2);
    for (const auto& isa : variants)
        for (bool ta : {false, true})
            for (Shape s : {Shape{64, 64, 64}, Shape{64, 128, 64}, Shape{8, 32, 5}, Shape{37, 50, 16}, Shape{5, 3, 7},
                            Shape{1, 1, 1}, Shape{64, 64, 0}})
                for (float beta : {0.0f, 1.0f}) check_against_reference(isa, ta, s, beta);
}
