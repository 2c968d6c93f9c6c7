// GEMM cases: transposes, accumulation (beta = 1, also from a separate C), strided and broadcast
// batches, 16-bit operands with 16-bit or fp32 results, rank-1 products (k = 1, m = 1).
#include <fmt/format.h>

#include "kernels/selftest/case_builder.h"
#include "kernels/selftest/cases.h"

namespace tune::kernels::selftest {

namespace {

struct GemmShape {
    std::int64_t m, n, k, batch;
    bool ta, tb;
    float alpha, beta;
    bool broadcast_b;       // stride_b = 0
    std::int64_t skew = 0;  // odd alignment: every operand starts `skew` elements in, leading dimensions + skew
    bool c_in = false;      // beta's C read from a second buffer (GemmArgs::c_in)
};

Case gemm_case(const GemmShape& s, DType ab, DType c) {
    const std::string label =
        fmt::format("m={} n={} k={}{}{}{}{}{}{}", s.m, s.n, s.k, s.ta ? " Ta" : "", s.tb ? " Tb" : "",
                    s.batch > 1 ? fmt::format(" batch={}", s.batch) : "", s.broadcast_b ? " bcastB" : "",
                    s.skew > 0 ? fmt::format(" skew={}", s.skew) : "", s.c_in ? " Cin" : "");
    const std::string types = ab == c ? name_of(ab) : name_of(ab) + "->" + name_of(c);
    return {"gemm", types, label + (s.beta != 0 ? " beta=1" : ""), [=](std::uint64_t seed) {
                CaseBuilder cb(seed);
                // Row-major storage: A is (m, k) or (k, m), rows of lda elements; likewise B and C.
                const std::int64_t lda = (s.ta ? s.m : s.k) + s.skew, ldb = (s.tb ? s.k : s.n) + s.skew;
                const std::int64_t ldc = s.n + s.skew;
                const std::int64_t a_elems = (s.ta ? s.k : s.m) * lda, b_elems = (s.tb ? s.n : s.k) * ldb;
                const std::int64_t c_elems = s.m * ldc;
                const auto a = cb.normal("a", ab, s.skew + a_elems * s.batch);
                const auto b = cb.normal("b", ab, s.skew + b_elems * (s.broadcast_b ? 1 : s.batch));
                const auto out = cb.normal_output("c", c, s.skew + c_elems * s.batch, OpClass::matmul);
                const auto in = s.c_in ? cb.normal("c_in", c, s.skew + c_elems * s.batch) : out;
                return cb.build([=](Backend& be, DeviceTensors& d) {
                    const auto at = [&](std::size_t i, DType t) {
                        const auto skew_bytes = s.skew * static_cast<std::int64_t>(dtype_bytes(t));
                        return static_cast<void*>(static_cast<char*>(d[i]) + skew_bytes);
                    };
                    GemmArgs g;
                    g.m = s.m, g.n = s.n, g.k = s.k, g.trans_a = s.ta, g.trans_b = s.tb;
                    g.a = at(a, ab), g.lda = lda, g.stride_a = a_elems;
                    g.b = at(b, ab), g.ldb = ldb, g.stride_b = s.broadcast_b ? 0 : b_elems;
                    g.c = at(out, c), g.ldc = ldc, g.stride_c = c_elems;
                    if (s.c_in) g.c_in = at(in, c);
                    g.batch = s.batch, g.alpha = s.alpha, g.beta = s.beta;
                    g.a_dtype = g.b_dtype = ab, g.c_dtype = c;
                    be.gemm(g, d.workspace(be.gemm_workspace_bytes(g)));
                });
            }};
}

}  // namespace

void add_gemm_cases(std::vector<Case>& out) {
    const GemmShape shapes[] = {
        {64, 48, 32, 1, false, false, 1.0f, 0.0f, false},
        {33, 70, 129, 1, false, true, 0.5f, 1.0f, false},
        {40, 24, 56, 1, true, false, 1.0f, 0.0f, false},
        {16, 32, 24, 3, false, false, 1.0f, 0.0f, false},
        {20, 12, 36, 4, false, true, 1.0f, 1.0f, true},
        // Odd alignment: operands one element past an aligned start, odd leading dimensions.
        {7, 9, 13, 1, false, false, 1.0f, 1.0f, false, 1},
        {11, 6, 5, 3, true, true, 0.5f, 0.0f, false, 3},
        // The bias GEMMs (train/model.h): y += ones (T, 1) b (1, n), and db += ones^T dy.
        {96, 40, 1, 1, false, false, 1.0f, 1.0f, false},
        {1, 40, 96, 1, true, false, 1.0f, 1.0f, false},
        // A residual entering the product from its own buffer (the layer output = x2 + m Wd^T).
        {24, 40, 56, 1, false, true, 1.0f, 1.0f, false, 0, true},
        {9, 12, 7, 2, false, false, 0.5f, 1.0f, false, 1, true},
    };
    for (DType t : kFloatTypes) {
        for (const auto& s : shapes) out.push_back(gemm_case(s, t, t));
        if (t != DType::f32) out.push_back(gemm_case(shapes[1], t, DType::f32));
    }
}

}  // namespace tune::kernels::selftest
