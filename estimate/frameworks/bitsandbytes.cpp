// What bitsandbytes' 4-bit linear (bnb.nn.Linear4bit through MatMul4Bit), as
// QLoRA under PEFT and LitGPT runs it, holds beyond our engine.
#include <fmt/format.h>

#include "core/offload_plan.h"
#include "estimate/frameworks/framework_profile.h"
#include "estimate/model_states.h"
#include "kernels/math/nf4.h"

namespace tune {

FrameworkTerm bnb_kept_inputs(const TrialConfig& c, const LibraryVersions& v, KeptInputs how) {
    FrameworkTerm t;
    if (c.method != Method::qlora || !v.bnb_keeps_matmul_inputs()) return t;
    // Before 0.43.2 MatMul4Bit.forward keeps every 4-bit linear's input, which
    // nothing else keeps when the weight is frozen (PyTorch's mm saves its input
    // only for the weight's gradient: tools/autograd/gen_variable_type.py
    // guard_for). Per layer: the attention's normed input, the attention output
    // (where the model copies it out of SDPA's layout), the MLP's normed input
    // (gate and up share it) and the gated product. A checkpointed layer holds
    // them only while it is recomputed.
    const ModelSpec& m = c.model;
    const std::uint64_t layers = c.checkpointing == Checkpointing::none ? m.layers : 1;
    const std::uint64_t tokens = std::uint64_t{c.micro_batch} * c.context;
    t.bytes = static_cast<std::int64_t>(weight_bytes(c.precision) * tokens * layers *
                                        ((how.attention_output_copied ? 3 : 2) * m.hidden + m.ffn));
    t.what = fmt::format("bitsandbytes {}'s MatMul4Bit keeps each 4-bit linear's input ({} layers x {} tokens)",
                         to_string(*v.bitsandbytes), layers, tokens);
    t.alive = alive_in({Phase::forward, Phase::head_backward, Phase::layer_backward});
    // They sit on ctx, not in saved tensors: backward does not free them, the graph's owner does.
    if (how.held_to_next_step) t.alive = kWholeStep;
    return t;
}

namespace {

// An NF4 buffer's quantization state (absmax codes, second-level scales, the
// offset): all of it but the packed codes.
std::int64_t quant_state_bytes(std::int64_t n) {
    const math::Nf4Sizes s = math::nf4_sizes(n);
    return s.bytes - s.packed;
}

}  // namespace

FrameworkTerm bnb_quant_state_term(const TrialConfig& c) {
    FrameworkTerm t{"bitsandbytes' quantization state, whole on every rank", 0, kWholeStep};
    const StateSettings s = StateSettings::of(c);
    if (c.method != Method::qlora || !s.zero.shards_parameters) return t;
    // nn/modules.py Params4bit._quantize keeps the QuantState (absmax, the nested
    // absmax and its code) on the Linear4bit module as well as on the weight, and
    // Linear4bit.forward (fix_4bit_weight_quant_state_from_module) restores it from
    // the module once FSDP or DeepSpeed has replaced the weight by its flat shard:
    // they shard and offload the packed codes, a parameter, but never these plain
    // tensors, which stay on each rank's device whole. Our engine shards all three
    // parts at ZeRO-3 (kernels/math/nf4.h nf4_shard) and offloads them with the codes.
    const FlatLayout layout = local_flat_layout(c);
    const auto n = static_cast<std::int64_t>(full_numel(layout.layer.numel, s.shards, s.align));
    const std::int64_t shard = math::nf4_shard(n, static_cast<std::int64_t>(s.shards)).shard;
    const std::int64_t ours = offload_plan(c.offload).params_on_host ? 0 : quant_state_bytes(shard);
    t.bytes = static_cast<std::int64_t>(layout.layer.count) * (quant_state_bytes(n) - ours);
    return t;
}

}  // namespace tune
