// What bitsandbytes' 4-bit linear (bnb.nn.Linear4bit through MatMul4Bit), as
// QLoRA under PEFT and LitGPT runs it, holds beyond our engine.
#include <fmt/format.h>

#include "search/frameworks/framework_profile.h"

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

}  // namespace tune
