// What transformers' modelling (LlamaForCausalLM, as HF Trainer, a torchrun
// script, DeepSpeed and accelerate run it) holds beyond our engine.
#include <fmt/format.h>

#include "search/frameworks/framework_profile.h"

namespace tune {

namespace {

constexpr std::size_t kForward = 0, kHead = 1, kLayers = 2;

// torch.autocast casts each fp32 weight to 16 bits for its matmul, and the
// matmul saves that copy for backward: 2 bytes a layer parameter for every
// layer kept whole (all of them without checkpointing, the recomputed one with it).
FrameworkTerm autocast_copies(const TrialConfig& c, bool whole) {
    FrameworkTerm t{"autocast's 16-bit weight copies, saved for backward",
                    static_cast<std::int64_t>(2 * c.model.layer_params() * (whole ? c.model.layers : 1)),
                    {}};
    t.alive[kForward] = t.alive[kLayers] = true;
    t.alive[kHead] = whole;
    return t;
}

}  // namespace

std::vector<FrameworkTerm> transformers_terms(FrameworkProfile f, const TrialConfig& c, const Hardware& hw,
                                              const EstimateOptions& o, const StepMemory& engine) {
    // HF Trainer and a torchrun script train a model loaded in fp32 under
    // torch.autocast for bf16-mixed and fp16-mixed; DeepSpeed and FSDP cast the
    // parameters themselves (their own 16-bit copies, which our engine's weights stand for).
    const bool autocast = (f == FrameworkProfile::hf_trainer || f == FrameworkProfile::torchrun) && !c.adapters() &&
                          (c.precision == Precision::bf16_mixed || c.precision == Precision::fp16_mixed);
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
    if (autocast) terms.push_back(autocast_copies(c, whole));
    // PEFT's QLoRA runs bitsandbytes' Linear4bit; Trainer.training_step lets the
    // graph go before the optimizer steps.
    if (FrameworkTerm kept = bnb_kept_inputs(c, o.libraries, false); kept.bytes > 0) terms.push_back(std::move(kept));
    return terms;
}

}  // namespace tune
