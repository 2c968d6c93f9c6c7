#include "estimate/model_flops.h"

#include "core/peft_modules.h"

namespace tune {

std::vector<Linear> layer_linears(const ModelSpec& m, const TrialConfig& c) {
    const double h = static_cast<double>(m.hidden), q = static_cast<double>(m.q_dim());
    const double kv = static_cast<double>(m.kv_dim()), f = static_cast<double>(m.ffn);
    // The adapter rank of linear i (core/peft_modules.h's order), 0 where it has none.
    const auto r = [&](std::size_t i) {
        return c.adapters() && lora_adapts(c.lora_targets, i) ? static_cast<double>(c.lora_rank) : 0.0;
    };
    return {{.in = h, .out = q, .rank = r(0)},
            {.in = h, .out = kv, .rank = r(1), .sums_input_grad = true, .op_recomputed = !m.qk_norm},
            {.in = h, .out = kv, .rank = r(2), .sums_input_grad = true},
            {.in = q, .out = h, .rank = r(3), .adds_to_residual = true, .op_recomputed = true},
            {.in = h, .out = f, .rank = r(4)},
            {.in = h, .out = f, .rank = r(5), .sums_input_grad = true, .op_recomputed = true},
            {.in = f, .out = h, .rank = r(6), .down = true, .adds_to_residual = true}};
}

LinearFlops linear_flops(const Linear& l, bool frozen) {
    const double base = 2 * l.in * l.out, adapter = 2 * l.rank * (l.in + l.out);
    // Backward: dX = dY W, and dW = dY^T X unless frozen; the adapters' dY B,
    // (dY B) A, dA and dB, twice their forward's x A^T and (x A^T) B^T.
    return {base + adapter, (frozen ? 1.0 : 2.0) * base + 2 * adapter};
}

double attention_forward_flops(const ModelSpec& m, const TrialConfig& c) {
    const double s = static_cast<double>(c.context), q = static_cast<double>(m.q_dim());
    return (c.attention == Attention::flash ? 2.0 : 4.0) * s * q;
}

double model_flops_per_token(const ModelSpec& m, const TrialConfig& c) {
    const bool frozen = c.adapters();
    double layer = 3 * attention_forward_flops(m, c);
    for (const Linear& l : layer_linears(m, c)) {
        const LinearFlops x = linear_flops(l, frozen);
        layer += x.forward + x.backward;
    }
    const LinearFlops head = linear_flops({static_cast<double>(m.hidden), static_cast<double>(m.vocab)}, frozen);
    return static_cast<double>(m.layers) * layer + head.forward + head.backward;
}

}  // namespace tune
