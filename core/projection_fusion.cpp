#include "core/projection_fusion.h"

namespace tune {

namespace {

// Full training of unsharded weights under a checkpointing that frees a block's outputs together,
// with GEMMs whose scratch does not grow with their shape.
bool whole_block(const TrialConfig& c, bool widening_backend) {
    if (widening_backend && c.precision != Precision::fp32) return false;
    return c.method == Method::full && c.tensor_parallel <= 1 && c.checkpointing != Checkpointing::selective_op;
}

bool fills_slots(std::uint64_t elements, std::uint64_t alignment) { return alignment > 0 && elements % alignment == 0; }

}  // namespace

bool fuses_qkv(const TrialConfig& c, const ModelSpec& model, std::uint64_t tensor_alignment, bool widening_backend) {
    if (!whole_block(c, widening_backend) || model.qkv_bias || model.qk_norm) return false;
    return fills_slots(model.q_dim() * model.hidden, tensor_alignment) &&
           fills_slots(model.kv_dim() * model.hidden, tensor_alignment);
}

bool fuses_gate_up(const TrialConfig& c, const ModelSpec& model, std::uint64_t tensor_alignment,
                   bool widening_backend) {
    if (!whole_block(c, widening_backend) || model.mlp_bias) return false;
    return fills_slots(model.ffn * model.hidden, tensor_alignment);
}

}  // namespace tune
