#include "estimate/gemm_calls.h"

#include "core/projection_fusion.h"
#include "estimate/flat_layout.h"

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
    c.op_recomputed = l.op_recomputed;
    return c;
}

namespace {

// Linears [first, last) of one layer run fused (full training: every base is trained, no adapter).
LinearGemmCalls fused_gemm_calls(const std::vector<Linear>& linears, std::size_t first, std::size_t last,
                                 std::int64_t t) {
    const std::int64_t in = whole(linears[first].in);
    std::int64_t out = 0;
    for (std::size_t i = first; i < last; ++i) out += whole(linears[i].out);
    LinearGemmCalls c;
    c.forward.push_back({t, out, in, GemmPass::forward, {}});
    c.backward.push_back({t, in, out, GemmPass::input_grad, {}});
    for (std::size_t i = first; i < last; ++i)
        c.backward.push_back({whole(linears[i].out), in, t, GemmPass::weight_grad, {}});
    c.recompute = c.forward;
    return c;
}

}  // namespace

std::vector<LinearGemmCalls> layer_gemm_calls(const ModelSpec& m, const TrialConfig& c, std::int64_t t,
                                              bool widening_backend) {
    const std::vector<Linear> linears = layer_linears(m, c);  // q, k, v, o, gate, up, down
    const std::uint64_t alignment = flat_alignment(c.adam8bit_block);
    const bool qkv = fuses_qkv(c, m, alignment, widening_backend);
    const bool gate_up = fuses_gate_up(c, m, alignment, widening_backend);
    std::vector<LinearGemmCalls> out;
    for (std::size_t i = 0; i < linears.size(); ++i) {
        if (qkv && i == 0) {
            out.push_back(fused_gemm_calls(linears, 0, 3, t));
            i = 2;
        } else if (gate_up && i == 4) {
            out.push_back(fused_gemm_calls(linears, 4, 6, t));
            i = 5;
        } else {
            out.push_back(linear_gemm_calls(linears[i], t, c.adapters()));
        }
    }
    return out;
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
