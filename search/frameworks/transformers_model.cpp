// What transformers' modelling (LlamaForCausalLM, as HF Trainer, a torchrun
// script, DeepSpeed and accelerate run it) holds beyond our engine.
#include <fmt/format.h>

#include "core/tensor_parallel.h"
#include "search/frameworks/eager_ops.h"
#include "search/frameworks/framework_profile.h"
#include "search/model_flops.h"
#include "search/recompute.h"

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

// HF Trainer and a torchrun script train a model loaded in fp32 under
// torch.autocast for bf16-mixed and fp16-mixed; DeepSpeed and FSDP cast the
// parameters themselves (their own 16-bit copies, which our engine's weights stand for).
bool runs_autocast(FrameworkProfile f, const TrialConfig& c) {
    return (f == FrameworkProfile::hf_trainer || f == FrameworkProfile::torchrun) && !c.adapters() &&
           (c.precision == Precision::bf16_mixed || c.precision == Precision::fp16_mixed);
}

// The decoder layer's saved set against our engine's (layer_saved_tensors): all
// layers without checkpointing, the one recomputed with it. A full fine-tune is
// counted tensor by tensor; under adapters PEFT's lora.Linear (its dropout and
// input casts per module) is not, and the set stays about 1.7 times our layer's.
FrameworkTerm saved_tensors_term(const TrialConfig& c, const Hardware& hw, const EstimateOptions& o, bool autocast,
                                 bool whole) {
    const std::int64_t layers = whole ? static_cast<std::int64_t>(c.model.layers) : 1;
    FrameworkTerm t{"", 0, alive_in({Phase::forward, Phase::layer_backward})};
    t.alive[kHead] = whole;
    if (c.adapters()) {
        const ActivationSizes a = activation_sizes(c.model, c, hw, o);
        t.what = "the decoder layer's saved tensors beyond ours (about 0.7 of our layer's)";
        t.bytes = static_cast<std::int64_t>(0.7 * static_cast<double>(a.kept_none) * static_cast<double>(layers));
        return t;
    }
    const std::uint64_t tokens = std::uint64_t{c.micro_batch} * c.context;
    std::int64_t engine = 0, statistics = 0;
    for (const SavedTensor& saved : layer_saved_tensors(c.model, c).view()) {
        engine += static_cast<std::int64_t>(saved.bytes);
        if (saved.name == "attention") statistics = static_cast<std::int64_t>(saved.bytes);
    }
    // Eager attention's fp32 softmax beside the 16-bit probabilities our engine keeps too.
    if (c.attention == Attention::eager)
        statistics += statistics / static_cast<std::int64_t>(weight_bytes(c.precision)) * 4;
    const auto hf =
        static_cast<std::int64_t>(transformers_layer_saved_per_token(c, autocast) * static_cast<double>(tokens)) +
        statistics;
    t.what = fmt::format(
        "the decoder layer's saved tensors beyond ours ({} layer{} x {} tokens): the norms' fp32 "
        "inputs, the attention output's contiguous copy, the activation's output",
        layers, layers == 1 ? "" : "s", tokens);
    t.bytes = layers * (hf - engine);
    return t;
}

}  // namespace

// transformers' LlamaDecoderLayer (models/llama/modeling_llama.py, with
// integrations/sdpa_attention.py), the bytes one layer keeps per token for a full
// fine-tune, beside the attention's statistics. `r` is the residual stream's dtype
// (fp32 under autocast), `s` the matmuls' outputs'.
//   LlamaRMSNorm.forward: hidden_states.to(float32), which pow and the product by
//     rsqrt keep (under autocast or fp32 the layer's input itself), the fp32 rsqrt,
//     and hidden_states.to(input_dtype), which the product by the trainable weight keeps;
//   q, k, v_proj (gate and up_proj) keep the norm's output, cast to s under autocast;
//   apply_rotary_pos_emb's products keep cos and sin, which need no gradient, and
//     so neither q nor k (tools/autograd/gen_variable_type.py guard_for);
//   SDPA keeps q, k and v (at their own widths: enable_gqa when no mask is passed,
//     use_gqa_in_sdpa) and its output; transpose(1, 2).contiguous() copies the
//     output, which o_proj keeps. Eager attention (eager_attention_forward) keeps
//     repeat_kv's copies, the fp32 softmax and its cast, and no output;
//   LlamaMLP.forward: act_fn keeps gate's output, the product keeps act_fn's and
//     up's, down_proj keeps the product.
double transformers_layer_saved_per_token(const TrialConfig& c, bool autocast) {
    const ModelSpec& m = c.model;
    const double s = weight_bytes(c.precision), r = autocast ? 4.0 : s;
    const double h = static_cast<double>(m.hidden), q = static_cast<double>(m.q_dim());
    const double kv = static_cast<double>(m.kv_dim()), f = static_cast<double>(m.ffn);
    const bool eager = c.attention == Attention::eager, grouped = m.kv_heads != m.heads;
    const double norm = 4 * h + 4 + r * h + s * h;
    const double attention = eager ? s * (q + 2 * (grouped ? q : kv)) + s * q : s * (q + 2 * kv) + 2 * s * q;
    return 2 * norm + attention + 4 * s * f;
}

std::vector<FrameworkTerm> transformers_terms(FrameworkProfile f, const TrialConfig& c, const Hardware& hw,
                                              const EstimateOptions& o, const StepMemory& engine) {
    const bool autocast = runs_autocast(f, c);
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

    const bool whole = c.checkpointing != Checkpointing::full;
    terms.push_back(saved_tensors_term(c, hw, o, autocast, whole));
    if (autocast) terms.push_back(autocast_copies(c, whole));
    // PEFT's QLoRA runs bitsandbytes' Linear4bit; Trainer.training_step lets the
    // graph go before the optimizer steps.
    if (FrameworkTerm kept = bnb_kept_inputs(c, o.libraries, {}); kept.bytes > 0) terms.push_back(std::move(kept));
    if (FrameworkTerm state = bnb_quant_state_term(c); state.bytes > 0) terms.push_back(std::move(state));
    return terms;
}

// transformers' Llama (models/llama/modeling_llama.py): LlamaDecoderLayer.forward's
// two LlamaRMSNorms and residual sums; apply_rotary_pos_emb on q and k (cos and
// sin in the hidden states' dtype, LlamaRotaryEmbedding.forward); repeat_kv's
// copies of k and v for eager attention (SDPA takes grouped heads with enable_gqa
// where no mask is passed: sdpa_attention_forward); the attention output's
// transpose(1, 2).contiguous(); LlamaMLP's act_fn(gate) * up; PEFT's
// lora.Linear.forward adds lora_B(lora_A(x)) * scaling to the base output;
// loss/loss_utils.py ForCausalLMLoss upcasts the logits. Under autocast the
// fp32 model keeps an fp32 residual stream: each matmul casts its input (the
// norms' outputs feed q, k, v and gate, up) and, once per forward, its weight.
EagerTraffic transformers_eager(FrameworkProfile f, const TrialConfig& c) {
    const EagerWidths w = eager_widths(c);
    const bool autocast = runs_autocast(f, c);
    const double s = weight_bytes(c.precision);  // the matmuls' outputs
    const double stream = autocast ? 4.0 : s;    // the residual stream, the norms and cos, sin
    double lora = 0;
    for (const Linear& l : layer_linears(tensor_parallel_plan(c).local(c.model), c))
        if (l.rank > 0) lora += 5 * s * l.out;  // the product by scaling, the sum into the base output
    EagerTraffic t;
    t.layer_forward = 2 * eager::rmsnorm(stream) * w.hidden + (autocast ? 5 * (4 + s) * w.hidden : 0.0) +
                      eager::rotate_half_rope(s, stream) * (w.q + w.kv) +
                      (w.grouped_kv && c.attention == Attention::eager ? 2 * s * (w.kv + w.q) : 0.0) +
                      eager::copy(s) * w.q + eager::swiglu(s) * w.ffn + 2 * eager::residual_add(stream, s) * w.hidden +
                      lora;
    t.outer_forward = eager::rmsnorm(stream) * w.hidden;
    t.loss_whole = eager::upcast_cross_entropy(s) * w.vocab;
    if (autocast) {
        // The weight cast (4 + s bytes a parameter) runs in each forward and each
        // recompute of a layer, and once for the LM head.
        const ModelSpec& m = c.model;
        const double casts = recomputed(c.checkpointing).linears ? 2.0 : 1.0;
        t.per_micro_batch = (4 + s) * (casts * static_cast<double>(m.layers * m.layer_params()) +
                                       static_cast<double>(m.vocab * m.hidden));
    }
    return t;
}

}  // namespace tune
