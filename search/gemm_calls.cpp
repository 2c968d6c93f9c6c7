#include "search/gemm_calls.h"

namespace tune {
namespace {

std::int64_t whole(double x) { return static_cast<std::int64_t>(x); }

}  // namespace

LinearGemmCalls linear_gemm_calls(const Linear& l, std::int64_t t, bool frozen_base) {
    const std::int64_t in = whole(l.in), out = whole(l.out), r = whole(l.rank);
    LinearGemmCalls c;
    const GemmCall base{t, out, in, GemmPass::forward, {.accumulate = l.adds_to_residual}};
    c.forward.push_back(base);
    c.backward.push_back({t, in, out, GemmPass::input_grad, {.accumulate = l.sums_input_grad}});
    if (!frozen_base) c.backward.push_back({out, in, t, GemmPass::weight_grad, {}});
    if (r > 0) {
        const GemmCall project{t, r, in, GemmPass::forward, {}};
        c.forward.push_back(project);
        c.forward.push_back({t, out, r, GemmPass::forward, {.accumulate = true}});
        c.backward.push_back({t, r, out, GemmPass::input_grad, {}});
        c.backward.push_back({t, in, r, GemmPass::input_grad, {.accumulate = true}});
        c.backward.push_back({r, in, t, GemmPass::weight_grad, {}});
        c.backward.push_back({out, r, t, GemmPass::weight_grad, {}});
        if (l.down) c.recompute.push_back(project);
    }
    if (!l.down) c.recompute = c.forward;
    return c;
}

LinearGemmCalls head_gemm_calls(const ModelSpec& m, std::int64_t t, bool fp32_logits, bool frozen) {
    const std::int64_t v = static_cast<std::int64_t>(m.vocab), h = static_cast<std::int64_t>(m.hidden);
    LinearGemmCalls c;
    c.forward.push_back({t, v, h, GemmPass::forward, {.fp32 = fp32_logits}});
    c.backward.push_back({t, h, v, GemmPass::input_grad, {}});
    if (!frozen) c.backward.push_back({v, h, t, GemmPass::weight_grad, {}});
    return c;
}

}  // namespace tune
