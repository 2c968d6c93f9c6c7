// GEMM cases: transposes, accumulation (beta = 1), strided and broadcast
// batches, 16-bit operands with 16-bit or fp32 results.
#include <fmt/format.h>

#include "kernels/selftest/case_builder.h"
#include "kernels/selftest/cases.h"

namespace tune::kernels::selftest {

namespace {

struct GemmShape {
    std::int64_t m, n, k, batch;
    bool ta, tb;
    float alpha, beta;
    bool broadcast_b;  // stride_b = 0
};

Case gemm_case(const GemmShape& s, DType ab, DType c) {
    const std::string label = fmt::format("m={} n={} k={}{}{}{}{}", s.m, s.n, s.k, s.ta ? " Ta" : "", s.tb ? " Tb" : "",
                                          s.batch > 1 ? fmt::format(" batch={}", s.batch) : "",
                                          s.broadcast_b ? " bcastB" : "");
    const std::string types = ab == c ? name_of(ab) : name_of(ab) + "->" + name_of(c);
    return {"gemm", types, label + (s.beta != 0 ? " beta=1" : ""), [=](std::uint64_t seed) {
                CaseBuilder cb(seed);
                const std::int64_t a_elems = s.m * s.k, b_elems = s.k * s.n, c_elems = s.m * s.n;
                const auto a = cb.normal("a", ab, a_elems * s.batch);
                const auto b = cb.normal("b", ab, b_elems * (s.broadcast_b ? 1 : s.batch));
                const auto out = cb.normal_output("c", c, c_elems * s.batch, OpClass::matmul);
                return cb.build([=](Backend& be, DeviceTensors& d) {
                    GemmArgs g;
                    g.m = s.m, g.n = s.n, g.k = s.k, g.trans_a = s.ta, g.trans_b = s.tb;
                    g.a = d[a], g.lda = s.ta ? s.m : s.k, g.stride_a = a_elems;
                    g.b = d[b], g.ldb = s.tb ? s.k : s.n, g.stride_b = s.broadcast_b ? 0 : b_elems;
                    g.c = d[out], g.ldc = s.n, g.stride_c = c_elems;
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
    };
    for (DType t : kFloatTypes) {
        for (const auto& s : shapes) out.push_back(gemm_case(s, t, t));
        if (t != DType::f32) out.push_back(gemm_case(shapes[1], t, DType::f32));
    }
}

}  // namespace tune::kernels::selftest
