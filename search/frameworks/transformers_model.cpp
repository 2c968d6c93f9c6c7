// What transformers' modelling (LlamaForCausalLM, as HF Trainer, a torchrun
// script, DeepSpeed and accelerate run it) holds beyond our engine.
#include <fmt/format.h>

#include "search/frameworks/framework_profile.h"

namespace tune {

namespace {

constexpr std::size_t kForward = 0, kHead = 1, kLayers = 2;

}  // namespace

std::vector<FrameworkTerm> transformers_terms(const TrialConfig& c, const Hardware& hw, const EstimateOptions& o,
                                              const StepMemory& engine) {
    const ModelSpec& m = c.model;
    const std::uint64_t tokens = std::uint64_t{c.micro_batch} * c.context;
    std::vector<FrameworkTerm> terms;

    // Logits over the whole vocabulary: LlamaForCausalLM.forward keeps the 16-bit
    // logits, loss/loss_utils.py ForCausalLMLoss upcasts them (logits.float()), and
    // cross_entropy's log_softmax keeps its fp32 output; its backward holds the
    // fp32 gradient of that output and of its input at once: 2 + 4 + 4 + 4 bytes
    // per logit at the head's backward, where our engine holds one chunk.
    const std::uint64_t logits = 14 * tokens * m.vocab;
    FrameworkTerm head{fmt::format("full-vocabulary logits, fp32 upcast and log-softmax ({} x {})", tokens, m.vocab),
                       static_cast<std::int64_t>(logits) -
                           static_cast<std::int64_t>(engine.at(Phase::head_backward)[Component::logits]),
                       {}};
    head.alive[kHead] = true;
    terms.push_back(head);

    // The decoder layer saves about 1.7 times our layer's set: LlamaRMSNorm
    // saves its fp32 upcast input, q and k are kept before and after
    // apply_rotary_pos_emb, and the attention output is made contiguous
    // (modeling_llama.py LlamaDecoderLayer). Whole layers: all of them without
    // checkpointing, the one recomputed with it.
    const ActivationSizes a = activation_sizes(m, c, hw, o);
    const bool whole = c.checkpointing != Checkpointing::full;
    FrameworkTerm layers{
        "the decoder layer's saved tensors beyond ours (about 0.7 of our layer's)",
        static_cast<std::int64_t>(0.7 * static_cast<double>(a.kept_none) * static_cast<double>(whole ? m.layers : 1)),
        {}};
    layers.alive[kForward] = layers.alive[kLayers] = true;
    layers.alive[kHead] = whole;
    terms.push_back(layers);
    return terms;
}

}  // namespace tune
