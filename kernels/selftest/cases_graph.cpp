// Ops recorded into a graph and replayed (kernels/backend.h OpGraph): a GEMM
// whose plan a first call made, an add and a scale, replayed twice into an
// accumulator, so a graph that ran nothing, ran once, or kept a stale
// argument shows. On a GPU this is a CUDA graph; the CPU calls the ops again.
#include <fmt/format.h>

#include "kernels/selftest/case_builder.h"
#include "kernels/selftest/cases.h"

namespace tune::kernels::selftest {

namespace {

Case graph_case(DType t) {
    constexpr std::int64_t m = 16, n = 24, k = 32;
    return {"graph replay",
            name_of(t),
            fmt::format("m={} n={} k={} two replays", m, n, k),
            [=](std::uint64_t seed) {
                CaseBuilder cb(seed);
                const auto x = cb.normal("x", t, m * k);
                const auto w = cb.normal("w", t, n * k, 0.2f);
                const auto r = cb.normal("r", t, m * n);
                const auto y = cb.zero_output("y", t, m * n, OpClass::matmul);
                const auto acc = cb.normal_output("acc", t, m * n, OpClass::matmul);
                return cb.build([=](Backend& be, DeviceTensors& d) {
                    GemmArgs g;
                    g.m = m, g.n = n, g.k = k, g.trans_b = true;
                    g.a = d[x], g.lda = k, g.b = d[w], g.ldb = k, g.c = d[y], g.ldc = n;
                    g.a_dtype = g.b_dtype = g.c_dtype = t;
                    const Workspace ws = d.workspace(be.gemm_workspace_bytes(g));
                    be.gemm(g, ws);  // the plan, made outside the graph
                    // y = x W^T + r, halved; acc += y
                    const std::unique_ptr<OpGraph> graph = be.record([&] {
                        be.gemm(g, ws);
                        be.add(d[y], d[y], d[r], m * n, t);
                        be.scale(d[y], m * n, 0.5f, t);
                        be.add(d[acc], d[acc], d[y], m * n, t);
                    });
                    graph->replay();
                    graph->replay();
                });
            },
            {"gemm", "add", "scale"}};
}

}  // namespace

void add_graph_cases(std::vector<Case>& out) {
    for (DType t : kFloatTypes) out.push_back(graph_case(t));
}

}  // namespace tune::kernels::selftest
