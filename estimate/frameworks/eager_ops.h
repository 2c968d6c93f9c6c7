// The time a stack spends in its element-wise PyTorch ops, which run eagerly,
// one kernel per op, each reading its inputs from HBM and writing its output
// there. Our engine fuses them (norms, RoPE, SwiGLU, the loss); the frameworks'
// modelling files chain them, so their traffic is part of a stack's step, a
// larger part for smaller models: it grows with hidden, the GEMMs with hidden^2.
//
// Each stack's rules file lists its ops' forward bytes per token; this file
// holds the ops' byte counts and the rule that turns a list into seconds:
// backward moves twice the forward's bytes (each op's backward reads the
// output's gradient and what it saved, and writes the input's gradient; the
// RMSNorm chain counted op by op gives 76 bytes beside its forward's 36), a
// checkpointing mode that reruns the element-wise forward moves it again, and
// everything streams at the device's HBM bandwidth.
#pragma once

#include "core/config.h"
#include "estimate/frameworks/framework_profile.h"

namespace tune {

// Bytes per element each op moves forward; `s` is the bytes of the tensor's dtype.
namespace eager {
// An RMSNorm as torchtitan's models/norms.py RMSNorm.forward and transformers'
// LlamaRMSNorm.forward run it: the fp32 upcast (s + 4), pow (4 + 4), mean (4),
// times rsqrt (4 + 4), the cast back (4 + s), times the weight (s + s). An fp32
// input makes both casts no-ops.
constexpr double rmsnorm(double s) { return (s == 4 ? 0 : 2 * (s + 4)) + 20 + 2 * s; }
// LitGPT's RMSNorm.forward (litgpt/model.py) multiplies by the weight in fp32
// before the cast back: the upcast (s + 4), x * x (4 + 4), mean (4), times
// rsqrt (4 + 4), times the weight (4 + 4), the cast back (4 + s).
constexpr double rmsnorm_fp32_weight(double s) { return (s == 4 ? 0 : 2 * (s + 4)) + 28; }
// The sum into the residual stream of dtype `s` of a branch's output of dtype `b`.
constexpr double residual_add(double s, double b) { return 2 * s + b; }
// F.silu(gate) * up: silu reads and writes, the product reads two and writes one.
constexpr double swiglu(double s) { return 5 * s; }
constexpr double copy(double s) { return 2 * s; }
// x * cos + rotate_half(x) * sin (transformers' apply_rotary_pos_emb, LitGPT's
// apply_rope) on `s`-byte x with `c`-byte cos and sin: rotate_half's negated half
// and cat (3s), the two products and their sum in the promoted dtype, and the
// cast back where cos promoted it.
constexpr double rotate_half_rope(double s, double c) {
    const double out = s > c ? s : c;
    return 3 * s + 2 * (s + out) + 3 * out + (out == s ? 0 : out + s);
}
// F.cross_entropy over the logits, forward and backward together: log_softmax's max
// and sum passes and its output (4 + 4 + 4 + 4), nll's scattered gradient (4), and
// log_softmax's backward (its sum pass, the output and gradient read, the input's
// gradient written: 4 x 4), all in fp32.
constexpr double cross_entropy_whole = 36;
// The same on `s`-byte logits cast to fp32 first (.float()), with the cast's backward.
constexpr double upcast_cross_entropy(double s) { return 2 * (s + 4) + cross_entropy_whole; }
}  // namespace eager

// The widths one rank's element-wise ops run over, per token: the residual
// stream's (split along the sequence with sequence parallelism), and the
// tensor-parallel shard's q, k and v, MLP and vocabulary (core/parallel_plan.h).
struct EagerWidths {
    double hidden = 0, q = 0, kv = 0, ffn = 0, vocab = 0;
    bool grouped_kv = false;  // fewer KV heads than query heads: repeated to the query heads
};
EagerWidths eager_widths(const TrialConfig& c);

// One stack's element-wise ops: forward bytes per token, per layer and once
// (the final norm), the loss's bytes per token over forward and backward, and
// bytes per micro-batch (casts of the weights).
struct EagerTraffic {
    double layer_forward = 0;
    double outer_forward = 0;
    double loss_whole = 0;
    double per_micro_batch = 0;
};

// Seconds a step of `c` spends on the traffic, on each rank.
double eager_seconds(const EagerTraffic& t, const TrialConfig& c, const Hardware& hw);

// Each stack's list (its rules file: torchtitan.cpp, transformers_model.cpp, litgpt.cpp).
EagerTraffic torchtitan_eager(const TrialConfig& c);
EagerTraffic transformers_eager(FrameworkProfile f, const TrialConfig& c, BaseDtype base = BaseDtype::fp32);
EagerTraffic litgpt_eager(const TrialConfig& c, double lora_dropout);

}  // namespace tune
