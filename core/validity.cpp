#include "core/validity.h"

#include <algorithm>
#include <array>
#include <tuple>
#include <utility>

#include <fmt/format.h>

#include "core/parallel_plan.h"
#include "core/peft_modules.h"
#include "core/zero_plan.h"

namespace tune {
namespace {

// Products of bounded dimensions fit in 128 bits; the bounds make that so.
__extension__ typedef unsigned __int128 Wide;

Invalidity shape(std::string reason) { return Invalidity{"model-shape", std::move(reason)}; }

std::optional<Invalidity> model_bounds(const ModelSpec& m) {
    const std::array<std::pair<std::uint64_t, const char*>, 7> dims{{{m.vocab, "vocab"},
                                                                     {m.hidden, "hidden"},
                                                                     {m.layers, "layers"},
                                                                     {m.heads, "heads"},
                                                                     {m.kv_heads, "kv_heads"},
                                                                     {m.ffn, "ffn"},
                                                                     {m.max_context, "max_context"}}};
    for (auto [value, key] : dims)
        if (value == 0) return shape(fmt::format("{} is missing or zero: give a preset or every dimension", key));
    const std::array<std::tuple<std::uint64_t, std::uint64_t, const char*>, 5> limits{
        {{m.vocab, kMaxVocab, "vocab"},
         {m.hidden, kMaxHidden, "hidden"},
         {m.layers, kMaxLayers, "layers"},
         {m.ffn, kMaxFfn, "ffn"},
         {m.max_context, kMaxContext, "max_context"}}};
    for (auto [value, limit, key] : limits)
        if (value > limit)
            return Invalidity{"model-size", fmt::format("{} = {} is beyond any model tune can train (at most {})", key,
                                                        value, limit)};
    return std::nullopt;
}

std::optional<Invalidity> counts_problem(const TrialConfig& c) {
    if (c.steps == 0 || c.micro_batch == 0 || c.context == 0 || c.grad_accum == 0 || c.world_size == 0)
        return Invalidity{"counts", "steps, micro_batch, context, grad_accum and world_size must be positive"};
    const std::array<std::tuple<std::uint32_t, std::uint32_t, const char*>, 4> limits{
        {{c.micro_batch, kMaxMicroBatch, "micro_batch"},
         {c.grad_accum, kMaxGradAccum, "grad_accum"},
         {c.world_size, kMaxWorldSize, "world_size"},
         {c.steps, kMaxSteps, "steps"}}};
    for (auto [value, limit, key] : limits)
        if (value > limit) return Invalidity{"counts", fmt::format("{} = {} is more than {}", key, value, limit)};
    return std::nullopt;
}

// The largest buffers the estimator and the trainer compute, in 128 bits: a
// configuration whose attention probabilities or kept activations pass
// kMaxBytes cannot run anywhere, and its estimate would wrap around.
std::optional<Invalidity> size_problem(const TrialConfig& c) {
    const ModelSpec& m = c.model;
    const Wide t = Wide{c.micro_batch} * c.context;
    const Wide probs = t * c.context * m.heads * 4;
    const Wide kept = t * (6 * Wide{m.hidden} + 2 * Wide{m.kv_dim()} + 3 * Wide{m.ffn}) * 4 * m.layers;
    const Wide logits = t * m.vocab * 4;
    for (Wide bytes : {probs, kept, logits})
        if (bytes > kMaxBytes)
            return Invalidity{"model-size",
                              fmt::format("micro_batch {} x context {} needs activations beyond any machine's memory "
                                          "(over {} bytes)",
                                          c.micro_batch, c.context, kMaxBytes)};
    return std::nullopt;
}

std::optional<Invalidity> hyper_problem(const TrialConfig& c) {
    const std::uint32_t b = c.adam8bit_block;
    if (b < kMinAdam8bitBlock || b > kMaxAdam8bitBlock || (b & (b - 1)) != 0)
        return Invalidity{"adam8bit-block", fmt::format("adam8bit_block: {} is not a power of two ({} to {})", b,
                                                        kMinAdam8bitBlock, kMaxAdam8bitBlock)};
    auto outside = [](double v, double lo, double hi) { return !(v >= lo && v <= hi); };  // NaN is outside
    if (outside(c.lr, 0, 10) || outside(c.weight_decay, 0, 10) || outside(c.clip, 0, 1e6) ||
        outside(c.neftune_alpha, 0, 1000))
        return Invalidity{"hyperparameters",
                          "lr and weight_decay must be in 0..10, clip in 0..1e6 and "
                          "neftune_alpha in 0..1000"};
    if ((c.beta1 && outside(*c.beta1, 0, 0.999999)) || (c.beta2 && outside(*c.beta2, 0, 0.999999)) ||
        (c.eps && outside(*c.eps, 1e-30, 1)))
        return Invalidity{"hyperparameters", "beta1 and beta2 must be in 0..0.999999 and eps in 1e-30..1"};
    return std::nullopt;
}

// LoRA's rank within every targeted matrix, a positive alpha, and a 16-bit
// compute dtype for QLoRA's NF4 base (its GEMMs dequantize into it).
std::optional<Invalidity> lora_problem(const TrialConfig& c) {
    if (!c.adapters()) return std::nullopt;
    const ModelSpec& m = c.model;
    // The smaller side of each adapted matrix: q (q_dim, h), k, v (kv, h), o (h, q_dim), the MLP's (ffn, h).
    const std::uint64_t sides[7] = {std::min(m.q_dim(), m.hidden),  std::min(m.kv_dim(), m.hidden),
                                    std::min(m.kv_dim(), m.hidden), std::min(m.q_dim(), m.hidden),
                                    std::min(m.ffn, m.hidden),      std::min(m.ffn, m.hidden),
                                    std::min(m.ffn, m.hidden)};
    std::uint64_t side = ~std::uint64_t{0};
    for (std::size_t i = 0; i < 7; ++i)
        if (lora_adapts(c.lora_targets, i)) side = std::min(side, sides[i]);
    if (c.lora_rank == 0 || c.lora_rank > side)
        return Invalidity{"lora-rank", fmt::format("lora_rank {} must be between 1 and {}, the smaller side of the "
                                                   "smallest targeted matrix ({} targets)",
                                                   c.lora_rank, side, to_string(c.lora_targets))};
    if (c.lora_alpha && !(*c.lora_alpha > 0 && *c.lora_alpha <= 1e6))
        return Invalidity{"hyperparameters", "lora_alpha must be in (0, 1e6]; leave it out for 2 x lora_rank"};
    if (c.method == Method::qlora && c.precision == Precision::fp32)
        return Invalidity{"qlora-precision",
                          "qlora stores the base as 4-bit NF4 and computes in 16 bits: fp32 "
                          "storage cannot be had for its base; use bf16-mixed, fp16-mixed or "
                          "bf16, or method lora for an fp32 base"};
    return std::nullopt;
}

// Offload (core/offload_plan.h) runs the update on the host, where DeepSpeed
// has CPU implementations of Adam/AdamW, Adagrad and Lion only
// (deepspeed/ops/adam/cpu_adam.py, adagrad/cpu_adagrad.py, lion/cpu_lion.py).
std::optional<Invalidity> offload_problem(const TrialConfig& c) {
    if (c.offload == Offload::none) return std::nullopt;
    if (c.optimizer == Optimizer::lomo)
        return Invalidity{"offload-optimizer",
                          "lomo keeps no optimizer states and updates on the device as backward "
                          "runs: there is nothing to offload; use offload none"};
    if (c.optimizer != Optimizer::adamw && c.optimizer != Optimizer::lion)
        return Invalidity{"offload-optimizer",
                          fmt::format("{} has no host implementation to offload to (DeepSpeed's CPU optimizers are "
                                      "Adam/AdamW, Adagrad and Lion): offload adamw or lion, or use offload none",
                                      to_string(c.optimizer))};
    if (c.zero_stage < 2)
        return Invalidity{"offload-zero-stage",
                          fmt::format("offload streams each gradient bucket to the host as ZeRO-2 does; ZeRO stage {} "
                                      "keeps a whole gradient buffer on the device: use zero_stage 2 or 3 (DeepSpeed "
                                      "runs stage-1 offload the same way as stage 2)",
                                      c.zero_stage)};
    if (c.offload == Offload::optimizer_params && c.zero_stage != 3)
        return Invalidity{"offload-zero-stage",
                          "optimizer+params keeps parameter shards on the host, which needs "
                          "ZeRO stage 3 (DeepSpeed's offload_param); use zero_stage 3"};
    return std::nullopt;
}

// transformers' modeling_rope_utils (_validate_linear_scaling_rope_parameters,
// _validate_llama3_parameters) asks the same of these fields.
std::optional<Invalidity> rope_scaling_problem(const RopeScaling& r) {
    if (r.empty()) return std::nullopt;
    auto bad = [](std::string why) { return Invalidity{"model-constants", "rope_scaling: " + std::move(why)}; };
    if (!(r.factor >= 1 && r.factor <= 1e6)) return bad(fmt::format("factor {} must be in [1, 1e6]", r.factor));
    if (r.type != "llama3") return std::nullopt;
    if (!(r.low_freq_factor > 0 && r.high_freq_factor > r.low_freq_factor && r.high_freq_factor <= 1e6))
        return bad(fmt::format("llama3 needs 0 < low_freq_factor ({}) < high_freq_factor ({})", r.low_freq_factor,
                               r.high_freq_factor));
    if (r.original_context == 0 || r.original_context > (std::uint64_t{1} << 40))
        return bad(fmt::format("original_max_position_embeddings {} must be between 1 and 2^40", r.original_context));
    return std::nullopt;
}

}  // namespace

std::optional<std::uint64_t> checked_param_count(const ModelSpec& m) {
    if (m.heads == 0) return std::nullopt;
    const Wide h = m.hidden, d = m.head_dim_setting != 0 ? m.head_dim_setting : m.hidden / m.heads;
    const Wide q = Wide{m.heads} * d, kv = Wide{m.kv_heads} * d;
    const Wide bias = (m.qkv_bias ? q + 2 * kv : 0) + (m.o_bias ? h : 0) + (m.mlp_bias ? 2 * Wide{m.ffn} + h : 0);
    const Wide layer = h * q * 2 + h * kv * 2 + 3 * h * m.ffn + 2 * h + bias + (m.qk_norm ? 2 * d : 0);
    const Wide total = (m.tied_embeddings ? 1 : 2) * Wide{m.vocab} * h + layer * m.layers + h;
    if (total > Wide{~std::uint64_t{0}}) return std::nullopt;
    return static_cast<std::uint64_t>(total);
}

std::optional<Invalidity> model_problem(const ModelSpec& m) {
    if (auto bad = model_bounds(m)) return bad;
    if (m.head_dim_setting == 0 && m.hidden % m.heads != 0)
        return shape(fmt::format("hidden ({}) must be divisible by heads ({})", m.hidden, m.heads));
    if (m.heads % m.kv_heads != 0)
        return shape(fmt::format("heads ({}) must be divisible by kv_heads ({})", m.heads, m.kv_heads));
    if (m.head_dim() % 2 != 0) return shape(fmt::format("head dimension {} must be even for RoPE", m.head_dim()));
    // The bounds a sweep file's [model] and a config.json are read with (sweep/spec, core/hf_config).
    if (!(m.rms_norm_eps > 0 && m.rms_norm_eps <= 1))
        return Invalidity{"model-constants", fmt::format("rms_norm_eps {} must be in (0, 1]", m.rms_norm_eps)};
    if (!(m.rope_theta >= 1 && m.rope_theta <= 1e12))
        return Invalidity{"model-constants", fmt::format("rope_theta {} must be in [1, 1e12]", m.rope_theta)};
    if (auto bad = rope_scaling_problem(m.rope_scaling)) return bad;
    // Weights, gradients and optimizer states are at most 16 bytes per parameter.
    const std::optional<std::uint64_t> params = checked_param_count(m);
    if (!params || Wide{*params} * 16 > kMaxBytes)
        return Invalidity{"model-size", fmt::format("{} parameters is beyond any machine's memory",
                                                    params ? std::to_string(*params) : std::string("2^64 or more"))};
    return std::nullopt;
}

namespace {

// What our engine's pipeline runs beside: a stage accumulates its micro-batches' gradients whole and reduces
// them once per step (ZeRO 0-1, as Megatron-Core's distributed optimizer and DeepSpeed's pipeline engine do),
// and updates them after the last backward.
std::optional<Invalidity> pipeline_composition_problem(const TrialConfig& c) {
    if (c.pipeline_parallel <= 1) return std::nullopt;
    const auto refuse = [](std::string why) { return Invalidity{"pipeline-composition", std::move(why)}; };
    if (c.zero_stage >= 2)
        return refuse(
            fmt::format("ZeRO stage {} with pipeline_parallel: each stage keeps its gradients whole "
                        "across the micro-batches (ZeRO 0-1, as Megatron's distributed optimizer and "
                        "DeepSpeed's pipeline engine); use zero_stage 0 or 1",
                        c.zero_stage));
    if (c.optimizer == Optimizer::lomo)
        return refuse(
            "lomo with pipeline_parallel: lomo's fused update needs every micro-batch's backward to "
            "end before the next starts; use another optimizer");
    if (c.offload != Offload::none)
        return refuse(
            "offload with pipeline_parallel: the engine does not stream a stage's states to the "
            "host; use offload none");
    return std::nullopt;
}

}  // namespace

std::optional<Invalidity> invalid_reason(const TrialConfig& c) {
    if (auto bad = model_problem(c.model)) return bad;
    if (auto bad = counts_problem(c)) return bad;
    if (c.zero_stage > kMaxZeroStage)
        return Invalidity{"zero-stage", fmt::format("ZeRO stage {} does not exist (0-3)", c.zero_stage)};
    if (c.optimizer == Optimizer::lomo && c.grad_accum > 1)
        return Invalidity{
            "lomo-accumulation",
            "lomo applies each gradient as backward produces it, so it cannot accumulate (grad_accum > 1)"};
    if (c.context > c.model.max_context)
        return Invalidity{"context",
                          fmt::format("context {} exceeds the model's max_context {}", c.context, c.model.max_context)};
    if (auto bad = size_problem(c)) return bad;
    if (auto bad = lora_problem(c)) return bad;
    if (auto bad = offload_problem(c)) return bad;
    if (auto bad = parallel_problem(c)) return bad;
    if (auto bad = pipeline_composition_problem(c)) return bad;
    return hyper_problem(c);
}

bool refuses_input(const Invalidity& problem) {
    constexpr std::array<std::string_view, 10> kinds{"model-size",      "model-constants", "counts", "zero-stage",
                                                     "adam8bit-block",  "hyperparameters", "warmup", "lora-rank",
                                                     "qlora-precision", "pipeline"};
    return std::find(kinds.begin(), kinds.end(), problem.kind) != kinds.end();
}

std::optional<Invalidity> warmup_problem(const TrialConfig& c) {
    if (c.warmup < c.steps) return std::nullopt;
    return Invalidity{"warmup", fmt::format("warmup ({}) must be less than steps ({}): throughput is measured after "
                                            "warmup",
                                            c.warmup, c.steps)};
}

std::optional<std::string> threads_problem(int threads, unsigned cores) {
    const long long limit = static_cast<long long>(std::max(cores, 1u)) * kThreadsPerCoreLimit;
    if (threads < 0 || threads > limit)
        return fmt::format(
            "--threads {} must be between 1 and {} ({} per core of this machine's {}); 0 or "
            "leaving it out means OpenMP's default",
            threads, limit, kThreadsPerCoreLimit, cores);
    return std::nullopt;
}

}  // namespace tune
