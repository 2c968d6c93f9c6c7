// Every GEMM one micro-batch calls, as the trainer calls it: each layer
// linear's base GEMMs (train/model.cpp) and its adapter's (train/lora.cpp),
// and the LM head's (kernels/lm_head_loss.cpp), each with the pass and output
// (estimate/probed_rates.h) that fix its operand layout and its C. The one copy
// of that list: the probes measure its distinct calls (probe/probes.cpp
// plan_probes), the time model prices each at its rate (estimate/estimate_time.cpp).
#pragma once

#include <cstdint>
#include <vector>

#include "estimate/model_flops.h"
#include "estimate/probed_rates.h"

namespace tune {

// C (m, n) from A (m, k) and B (k, n), in a pass's layout.
struct GemmCall {
    std::int64_t m = 0, n = 0, k = 0;
    GemmPass pass = GemmPass::forward;
    GemmOutput output;
    double flops() const { return 2.0 * static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k); }
    bool operator==(const GemmCall&) const = default;
};

// One linear's calls at `tokens` rows, by phase.
//   forward:   Y (T, out) = X W^T (into the residual for o and down), then the
//              adapter's xa (T, r) = X A^T and Y += s xa B^T;
//   backward:  dX (T, in) = dY W (summed into the previous linear's for k, v
//              and up), dW (out, in) += dY^T X unless the base is frozen, then
//              the adapter's tmp (T, r) = dY B, dX += s tmp A, dA += s tmp^T X,
//              dB += s dY^T xa;
//   recompute: full checkpointing's forward again, where the down projection
//              only projects (its output is not needed again, only xa for dB).
struct LinearGemmCalls {
    std::vector<GemmCall> forward, backward, recompute;
    bool op_recomputed = false;  // selective-op checkpointing runs its forward again (Linear::op_recomputed)
};
LinearGemmCalls linear_gemm_calls(const Linear& l, std::int64_t tokens, bool frozen_base);

// One layer's, as the trainer runs them on a backend (widening_backend: the CPU's,
// core/projection_fusion.h): where it fuses q, k, v (gate, up), one forward GEMM
// (T, q + 2kv) and one input gradient for the group, each weight gradient its own.
std::vector<LinearGemmCalls> layer_gemm_calls(const ModelSpec& m, const TrialConfig& c, std::int64_t tokens,
                                              bool widening_backend);

// The LM head's: logits (T, vocab) in fp32 whatever the operands (fp32_logits:
// 16-bit operands), dX, and its dW unless frozen.
LinearGemmCalls head_gemm_calls(const ModelSpec& m, std::int64_t tokens, bool fp32_logits, bool frozen);

}  // namespace tune
