// What transformers' modelling (LlamaForCausalLM, as HF Trainer, a torchrun
// script, DeepSpeed and accelerate run it) holds beyond our engine.
#include <fmt/format.h>

#include "core/parallel_plan.h"
#include "estimate/frameworks/eager_ops.h"
#include "estimate/frameworks/framework_profile.h"
#include "estimate/model_flops.h"
#include "estimate/recompute.h"

namespace tune {

namespace {

constexpr std::size_t kForward = 0, kHead = 1, kLayers = 2;

// torch.autocast casts each fp32 weight to 16 bits for its matmul, and the
// matmul saves that copy for backward: 2 bytes a layer parameter for every
// layer kept whole (all of them without checkpointing, the recomputed one with it).
// A frozen weight's copy is saved too, for its input's gradient (autocast caches
// only leaves that require grad, so each call casts anew).
FrameworkTerm autocast_copies(const TrialConfig& c, bool whole) {
    FrameworkTerm t{"autocast's 16-bit weight copies, saved for backward",
                    static_cast<std::int64_t>(2 * c.model.layer_params() * (whole ? c.model.layers : 1)),
                    {}};
    t.alive[kForward] = t.alive[kLayers] = true;
    t.alive[kHead] = whole;
    return t;
}

// HF Trainer and a torchrun script (at ZeRO-0: stack_rules) train under
// torch.autocast for bf16-mixed and fp16-mixed, over an fp32 model where
// holds_fp32_model says so; DeepSpeed and FSDP cast the parameters themselves
// (their own 16-bit copies, which our engine's weights stand for). Over a 16-bit
// base autocast's casts are no-ops and the residual stream is 16-bit.
bool runs_autocast(FrameworkProfile f, const TrialConfig& c, BaseDtype base) {
    return (f == FrameworkProfile::hf_trainer || f == FrameworkProfile::torchrun) && holds_fp32_model(f, c, base);
}

// PEFT's lora.Linear.forward (tuners/lora/layer.py): `x = self._cast_input_dtype(x,
// lora_A.weight.dtype)`, then `lora_B(lora_A(dropout(x)))`. lora_A keeps its input
// and lora_B lora_A's output; a dropout keeps its byte of mask. The adapters
// compute in the 16-bit dtype where DeepSpeed's engine casts the module
// (module.bfloat16()) or FSDP's mixed precision gathers it in param_dtype. Under
// HF Trainer and torchrun they are fp32: over a 16-bit base get_peft_model
// upcasts them (autocast_adapter_dtype), so each module casts its input to fp32;
// under mixed precision's autocast (over any base) each lora_A call casts its input
// to 16 bits. Without a cast or a dropout, modules that read one tensor (q, k, v;
// gate, up) keep it once.
double lora_inputs_per_token(FrameworkProfile f, const TrialConfig& c, double lora_dropout) {
    const double s = weight_bytes(c.precision);
    const bool trainer = f == FrameworkProfile::hf_trainer || f == FrameworkProfile::torchrun;
    const bool autocast = has_master_weights(c.precision);  // mixed precision
    const double a = !trainer ? s : autocast ? 2.0 : 4.0;
    const bool per_module = lora_dropout > 0 || autocast || a != s;
    const std::vector<Linear> linears = layer_linears(c.model, c);
    double bytes = 0, qkv = 0, gate_up = 0;
    for (std::size_t i = 0; i < linears.size(); ++i) {
        const Linear& l = linears[i];
        if (l.rank <= 0) continue;
        bytes += a * l.rank;  // lora_A's output, lora_B's input
        if (per_module)
            bytes += (lora_dropout > 0 ? 1 + a : a) * l.in;
        else if (i < 3)
            qkv = l.in;
        else if (i == 4 || i == 5)
            gate_up = l.in;
        else
            bytes += a * l.in;  // o's input (the contiguous copy), down's (the product)
    }
    return bytes + a * (qkv + gate_up);
}

// The decoder layer's saved set against our engine's (layer_saved_tensors): all
// layers without checkpointing, the one recomputed with it.
FrameworkTerm saved_tensors_term(FrameworkProfile f, const TrialConfig& c, const EstimateOptions& o, bool autocast,
                                 bool whole) {
    const std::int64_t layers = whole ? static_cast<std::int64_t>(c.model.layers) : 1;
    FrameworkTerm t{"", 0, alive_in({Phase::forward, Phase::layer_backward})};
    t.alive[kHead] = whole;
    const std::uint64_t tokens = std::uint64_t{c.micro_batch} * c.context;
    std::int64_t engine = 0, statistics = 0;
    for (const SavedTensor& saved : layer_saved_tensors(c.model, c).view()) {
        engine += static_cast<std::int64_t>(saved.bytes);
        if (saved.name == "attention") statistics = static_cast<std::int64_t>(saved.bytes);
    }
    // Eager attention's fp32 softmax beside the 16-bit probabilities our engine keeps too.
    if (c.attention == Attention::eager)
        statistics += statistics / static_cast<std::int64_t>(weight_bytes(c.precision)) * 4;
    const double per_token = transformers_layer_saved_per_token(f, c, autocast, o.lora_dropout);
    const auto hf = static_cast<std::int64_t>(per_token * static_cast<double>(tokens)) + statistics;
    t.what = fmt::format(
        "the decoder layer's saved tensors beyond ours ({} layer{} x {} tokens): the norms' fp32 inputs, {}", layers,
        layers == 1 ? "" : "s", tokens,
        c.adapters() ? "SDPA's output, the activation's output, each LoRA module's input"
                     : "the attention output's contiguous copy, the activation's output");
    t.bytes = layers * (hf - engine);
    return t;
}

}  // namespace

// transformers' LlamaDecoderLayer (models/llama/modeling_llama.py, with
// integrations/sdpa_attention.py), the bytes one layer keeps per token, beside
// the attention's statistics. `r` is the residual stream's dtype (fp32 under
// autocast), `s` the matmuls' outputs'. A frozen weight keeps nothing for its
// own gradient (tools/autograd/gen_variable_type.py guard_for).
//   LlamaRMSNorm.forward: hidden_states.to(float32), which pow and the product by
//     rsqrt keep (under autocast or fp32 the layer's input itself), the fp32 rsqrt,
//     and hidden_states.to(input_dtype), which a trainable weight's product keeps;
//   trainable q, k, v_proj (gate and up_proj) keep the norm's output, cast to s under autocast;
//   apply_rotary_pos_emb's products keep cos and sin, which need no gradient, not q or k;
//   SDPA keeps q, k and v (at their own widths: enable_gqa when no mask is passed,
//     use_gqa_in_sdpa) and its output; transpose(1, 2).contiguous() copies the
//     output, which a trainable o_proj keeps. Eager attention (eager_attention_forward)
//     keeps repeat_kv's copies, the fp32 softmax and its cast, and no output;
//   LlamaMLP.forward: act_fn keeps gate's output, the product keeps act_fn's and
//     up's, a trainable down_proj keeps the product;
//   under adapters, lora_inputs_per_token: what each lora_A keeps.
double transformers_layer_saved_per_token(FrameworkProfile f, const TrialConfig& c, bool autocast,
                                          double lora_dropout) {
    const ModelSpec& m = c.model;
    const double s = weight_bytes(c.precision), r = autocast ? 4.0 : s;
    const double h = static_cast<double>(m.hidden), q = static_cast<double>(m.q_dim());
    const double kv = static_cast<double>(m.kv_dim()), fn = static_cast<double>(m.ffn);
    const bool eager = c.attention == Attention::eager, grouped = m.kv_heads != m.heads, full = !c.adapters();
    const double norm = 4 * h + 4 + (full ? r * h + s * h : 0.0);
    const double qkv = eager ? s * (q + 2 * (grouped ? q : kv)) : s * (q + 2 * kv);
    const double output = (eager ? 0.0 : s * q) + (full ? s * q : 0.0);
    const double mlp = 3 * s * fn + (full ? s * fn : 0.0);
    return 2 * norm + qkv + output + mlp + (full ? 0.0 : lora_inputs_per_token(f, c, lora_dropout));
}

std::vector<FrameworkTerm> transformers_terms(FrameworkProfile f, const TrialConfig& c, const EstimateOptions& o,
                                              const StepMemory& engine) {
    const bool autocast = runs_autocast(f, c, o.base_dtype);
    const ModelSpec& m = c.model;
    std::vector<FrameworkTerm> terms;

    // Logits over the whole vocabulary (full_vocab_loss.cpp), where our engine holds one chunk.
    terms.push_back(full_vocab_loss_term(c, m.vocab, engine));

    const bool whole = c.checkpointing != Checkpointing::full;
    terms.push_back(saved_tensors_term(f, c, o, autocast, whole));
    // bitsandbytes' 4-bit linears dequantize in their own kernels and keep no weight copy.
    if (autocast && c.method != Method::qlora) terms.push_back(autocast_copies(c, whole));
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
EagerTraffic transformers_eager(FrameworkProfile f, const TrialConfig& c, BaseDtype base) {
    const EagerWidths w = eager_widths(c);
    const bool autocast = runs_autocast(f, c, base);
    const double s = weight_bytes(c.precision);  // the matmuls' outputs
    const double stream = autocast ? 4.0 : s;    // the residual stream, the norms and cos, sin
    double lora = 0;
    for (const Linear& l : layer_linears(parallel_plan(c).local(c.model), c))
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
