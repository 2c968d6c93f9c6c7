// What torchtitan (its own Llama under FSDP2, train.py's train_step) holds beyond our engine.
#include "core/parallel_plan.h"
#include "estimate/frameworks/eager_ops.h"
#include "estimate/frameworks/framework_profile.h"

namespace tune {

namespace {

// With tensor parallelism, loss_parallel keeps each rank's vocabulary shard of the logits.
std::uint64_t loss_vocab(const TrialConfig& c) { return parallel_plan(c).local(c.model).vocab; }

}  // namespace

std::vector<FrameworkTerm> torchtitan_terms(const TrialConfig& c, const StepMemory& engine) {
    const ModelSpec& m = c.model;
    const std::uint64_t tokens = std::uint64_t{c.micro_batch} * c.context;
    std::vector<FrameworkTerm> terms;

    terms.push_back(full_vocab_loss_term(c, loss_vocab(c), engine));

    // The op policy saves the down projection's output too (the 7th matmul of the
    // block); our engine adds it into the next layer's input, which that layer keeps.
    if (c.checkpointing == Checkpointing::selective_op) {
        FrameworkTerm down{"the down projection's output, saved by the op policy",
                           static_cast<std::int64_t>(weight_bytes(c.precision) * tokens * m.hidden * m.layers),
                           alive_in({Phase::forward, Phase::head_backward, Phase::layer_backward})};
        terms.push_back(down);
    }
    // parallelize.py apply_fsdp does not reshard the last decoder layer after forward
    // ("FSDP would prefetch it immediately"): at ZeRO-3 it stays gathered through the
    // head's backward, where our engine has let it go. fsdp_gather_terms adds the rest.
    if (c.zero_stage == 3)
        terms.push_back({"the last decoder layer, not resharded after forward",
                         static_cast<std::int64_t>(fsdp_gathered_layer_bytes(c)), alive_in({Phase::head_backward})});
    return terms;
}

std::vector<FrameworkTerm> torchtitan_cached_terms(const TrialConfig& c) {
    return full_vocab_loss_cached_terms(c, loss_vocab(c));
}

// torchtitan's Llama (models/llama/model.py at 9dec370, without torch.compile):
// TransformerBlock.forward's two RMSNorms (models/norms.py RMSNorm) and two
// residual sums; apply_rotary_emb upcasts q and k, multiplies them by the complex
// frequencies in fp32 and casts back (s + 4, 4 + 4, 4 + s); repeat_kv's
// expand-and-reshape copies k and v to every query head; Attention.forward makes
// SDPA's output contiguous; FeedForward.forward is F.silu(w1(x)) * w3(x). The
// loss is cross_entropy on pred.float() (components/loss.py cross_entropy_loss).
EagerTraffic torchtitan_eager(const TrialConfig& c) {
    const EagerWidths w = eager_widths(c);
    const double s = weight_bytes(c.precision);
    EagerTraffic t;
    t.layer_forward = 2 * eager::rmsnorm(s) * w.hidden + (2 * s + 16) * (w.q + w.kv) +
                      (w.grouped_kv ? 2 * s * (w.kv + w.q) : 0.0) + eager::copy(s) * w.q + eager::swiglu(s) * w.ffn +
                      2 * eager::residual_add(s, s) * w.hidden;
    t.outer_forward = eager::rmsnorm(s) * w.hidden;
    t.loss_whole = eager::upcast_cross_entropy(s) * w.vocab;
    return t;
}

}  // namespace tune
