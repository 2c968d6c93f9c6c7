#include "core/dimensions.h"

#include <algorithm>
#include <charconv>

#include <fmt/format.h>

#include "core/config.h"

namespace tune {
namespace {

template <typename Enum>
constexpr DimValue index_of(Enum e) {
    return static_cast<DimValue>(e);
}

// The rows, in display order. grid_rank orders the expansion: precision and
// ZeRO stage outermost (a new process layout), accumulation innermost.
constexpr std::array<Dimension, kDimensionCount> kTable{{
    {.name = "optimizer",
     .flag = "--optimizer",
     .header = "optimizer",
     .prefix = "",
     .help =
         "adamw, lion, adam8bit (8-bit states), adafactor (factored second moment) or lomo (fused update, no states)",
     .kind = DimKind::enumeration,
     .choices = kOptimizerNames,
     .grid_rank = 2,
     .curves_over_context = true,
     .fallback = [](const ModelSpec&) { return index_of(Optimizer::adamw); },
     .get = [](const TrialConfig& c) { return index_of(c.optimizer); },
     .set = [](TrialConfig& c, DimValue v) { c.optimizer = kOptimizers[v]; }},
    {.name = "precision",
     .flag = "--precision",
     .header = "precision",
     .prefix = "",
     .help = "fp32, bf16-mixed or fp16-mixed (16-bit weights, fp32 master and states), bf16 (everything 16-bit)",
     .kind = DimKind::enumeration,
     .choices = kPrecisionNames,
     .grid_rank = 0,
     .fallback = [](const ModelSpec&) { return index_of(Precision::bf16_mixed); },
     .get = [](const TrialConfig& c) { return index_of(c.precision); },
     .set = [](TrialConfig& c, DimValue v) { c.precision = kPrecisions[v]; }},
    {.name = "zero_stage",
     .flag = "--zero",
     .header = "zero",
     .prefix = "z",
     .help = "ZeRO stage: 0 replicates, 1 shards optimizer states, 2 also gradients, 3 also parameters",
     .kind = DimKind::integer,
     .min = 0,
     .max = 3,
     .grid_rank = 1,
     .fallback = [](const ModelSpec&) { return DimValue{0}; },
     .get = [](const TrialConfig& c) { return DimValue{c.zero_stage}; },
     .set = [](TrialConfig& c, DimValue v) { c.zero_stage = v; }},
    {.name = "grad_accum",
     .flag = "--grad-accum",
     .header = "accum",
     .prefix = "ga",
     .help = "micro-batches per optimizer step (gradient accumulation)",
     .kind = DimKind::integer,
     .min = 1,
     .max = 65536,
     .grid_rank = 6,
     .fallback = [](const ModelSpec&) { return DimValue{1}; },
     .get = [](const TrialConfig& c) { return DimValue{c.grad_accum}; },
     .set = [](TrialConfig& c, DimValue v) { c.grad_accum = v; }},
    {.name = "micro_batch",
     .flag = "--micro-batch",
     .header = "micro",
     .prefix = "mb",
     .help = "sequences per rank per micro-batch",
     .kind = DimKind::integer,
     .min = 1,
     .max = 65536,
     .grid_rank = 5,
     .fallback = [](const ModelSpec&) { return DimValue{1}; },
     .get = [](const TrialConfig& c) { return DimValue{c.micro_batch}; },
     .set = [](TrialConfig& c, DimValue v) { c.micro_batch = v; }},
    {.name = "context",
     .flag = "--context",
     .header = "context",
     .prefix = "ctx",
     .help = "tokens per sequence",
     .kind = DimKind::integer,
     .min = 1,
     .max = 1u << 22,
     .grid_rank = 4,
     // A common pre-training length, or the model's own maximum when shorter.
     .fallback = [](const ModelSpec& m) { return static_cast<DimValue>(std::min<std::uint64_t>(2048, m.max_context)); },
     .get = [](const TrialConfig& c) { return DimValue{c.context}; },
     .set = [](TrialConfig& c, DimValue v) { c.context = v; }},
    {.name = "checkpointing",
     .flag = "--checkpointing",
     .header = "ckpt",
     .prefix = "ckpt=",
     .help =
         "activation checkpointing: none, selective (recompute attention), full (recompute each layer) or "
         "selective-op (torchtitan's op policy: keep every other matmul output and attention's, recompute the rest)",
     .kind = DimKind::enumeration,
     .choices = kCheckpointingNames,
     .grid_rank = 3,
     .curves_over_context = true,
     .fallback = [](const ModelSpec&) { return index_of(Checkpointing::none); },
     .get = [](const TrialConfig& c) { return index_of(c.checkpointing); },
     .set = [](TrialConfig& c, DimValue v) { c.checkpointing = kCheckpointings[v]; }},
    {.name = "attention",
     .flag = "--attention",
     .header = "attn",
     .prefix = "",
     .help = "flash (tiled, keeps the log-sum-exp, recomputes scores in backward) or eager (keeps the (s, s) "
             "probabilities)",
     .kind = DimKind::enumeration,
     .choices = kAttentionNames,
     .grid_rank = 7,
     .legacy = index_of(Attention::eager),
     .curves_over_context = true,
     .fallback = [](const ModelSpec&) { return index_of(Attention::flash); },
     .get = [](const TrialConfig& c) { return index_of(c.attention); },
     .set = [](TrialConfig& c, DimValue v) { c.attention = kAttentions[v]; }},
    {.name = "method",
     .flag = "--method",
     .header = "method",
     .prefix = "",
     .help = "full (train every weight), lora (adapters beside a frozen base) or qlora (adapters beside a frozen "
             "NF4 base)",
     .kind = DimKind::enumeration,
     .choices = kMethodNames,
     .grid_rank = 8,
     .legacy = index_of(Method::full),
     .fallback = [](const ModelSpec&) { return index_of(Method::full); },
     .get = [](const TrialConfig& c) { return index_of(c.method); },
     .set = [](TrialConfig& c, DimValue v) { c.method = kMethods[v]; }},
    {.name = "lora_rank",
     .flag = "--lora-rank",
     .header = "rank",
     .prefix = "r",
     .help = "LoRA rank r: adapters A (r, in) and B (out, r) per targeted linear (lora and qlora only)",
     .kind = DimKind::integer,
     .min = 1,
     .max = 65536,
     .grid_rank = 9,
     .legacy = DimValue{16},
     .fallback = [](const ModelSpec&) { return DimValue{16}; },
     .get = [](const TrialConfig& c) { return DimValue{c.lora_rank}; },
     .set = [](TrialConfig& c, DimValue v) { c.lora_rank = v; },
     .applies = [](const TrialConfig& c) { return c.adapters(); }},
    {.name = "lora_targets",
     .flag = "--lora-targets",
     .header = "targets",
     .prefix = "",
     .help = "linears with adapters: qv (query and value, PEFT's and LitGPT's default for Llama), attention (q, "
             "k, v, o) or all-linear (also gate, up, down)",
     .kind = DimKind::enumeration,
     .choices = kLoraTargetNames,
     .grid_rank = 10,
     .legacy = index_of(LoraTargets::all_linear),
     .fallback = [](const ModelSpec&) { return index_of(LoraTargets::all_linear); },
     .get = [](const TrialConfig& c) { return index_of(c.lora_targets); },
     .set = [](TrialConfig& c, DimValue v) { c.lora_targets = kLoraTargets[v]; },
     .applies = [](const TrialConfig& c) { return c.adapters(); }},
    {.name = "offload",
     .flag = "--offload",
     .header = "offload",
     .prefix = "offload=",
     .help = "what lives in host memory: none; optimizer (fp32 master, optimizer states and gradients, updated on "
             "the CPU, as DeepSpeed's ZeRO-Offload); optimizer+params (also the parameter shards, ZeRO-3 only)",
     .kind = DimKind::enumeration,
     .choices = kOffloadNames,
     .grid_rank = 11,
     .legacy = index_of(Offload::none),
     .fallback = [](const ModelSpec&) { return index_of(Offload::none); },
     .get = [](const TrialConfig& c) { return index_of(c.offload); },
     .set = [](TrialConfig& c, DimValue v) { c.offload = kOffloads[v]; }},
    {.name = "tensor_parallel",
     .flag = "--tensor-parallel",
     .header = "tp",
     .prefix = "tp",
     .help = "ranks that split each layer's matrices (Megatron's column- and row-parallel linears, a "
             "vocabulary-parallel head); the world is data-parallel replicas times this, within a node",
     .kind = DimKind::integer,
     .min = 1,
     .max = 1024,
     .grid_rank = 12,
     .legacy = DimValue{1},
     .fallback = [](const ModelSpec&) { return DimValue{1}; },
     .get = [](const TrialConfig& c) { return DimValue{c.tensor_parallel}; },
     .set = [](TrialConfig& c, DimValue v) { c.tensor_parallel = v; }},
    {.name = "sequence_parallel",
     .flag = "--sequence-parallel",
     .header = "sp",
     .prefix = "sp=",
     .help = "off or on: split the residual and norm activations along the sequence over the tensor-parallel "
             "ranks (Korthikanti et al.; tensor_parallel > 1 only)",
     .kind = DimKind::enumeration,
     .choices = kSwitchNames,
     .grid_rank = 13,
     .legacy = DimValue{0},
     .fallback = [](const ModelSpec&) { return DimValue{0}; },
     .get = [](const TrialConfig& c) { return DimValue{c.sequence_parallel ? 1u : 0u}; },
     .set = [](TrialConfig& c, DimValue v) { c.sequence_parallel = v != 0; },
     .applies = [](const TrialConfig& c) { return c.tensor_parallel > 1; }},
    {.name = "pipeline_parallel",
     .flag = "--pipeline-parallel",
     .header = "pp",
     .prefix = "pp",
     .help = "pipeline stages, each a contiguous run of layers (the first with the embedding, the last with the "
             "head and loss); grad_accum micro-batches flow through them per step, so grad_accum >= this",
     .kind = DimKind::integer,
     .min = 1,
     .max = 1024,
     .grid_rank = 14,
     .legacy = DimValue{1},
     .fallback = [](const ModelSpec&) { return DimValue{1}; },
     .get = [](const TrialConfig& c) { return DimValue{c.pipeline_parallel}; },
     .set = [](TrialConfig& c, DimValue v) { c.pipeline_parallel = v; }},
    {.name = "pipeline_schedule",
     .flag = "--pipeline-schedule",
     .header = "schedule",
     .prefix = "",
     .help = "1f1b (stage i holds min(grad_accum, pp - i) micro-batches) or interleaved (virtual_stages chunks "
             "per stage: a smaller bubble, more activations on the first stages); pipeline_parallel > 1 only",
     .kind = DimKind::enumeration,
     .choices = kPipelineScheduleNames,
     .grid_rank = 15,
     .legacy = index_of(PipelineSchedule::one_f_one_b),
     .fallback = [](const ModelSpec&) { return index_of(PipelineSchedule::one_f_one_b); },
     .get = [](const TrialConfig& c) { return index_of(c.pipeline_schedule); },
     .set = [](TrialConfig& c, DimValue v) { c.pipeline_schedule = kPipelineSchedules[v]; },
     .applies = [](const TrialConfig& c) { return c.pipeline_parallel > 1; }},
    {.name = "virtual_stages",
     .flag = "--virtual-stages",
     .header = "vpp",
     .prefix = "v",
     .help = "model chunks per pipeline stage under the interleaved schedule (Megatron's virtual pipeline "
             "stages; 2 or more); layers must divide by pipeline_parallel x this",
     .kind = DimKind::integer,
     .min = 1,
     .max = 1024,
     .grid_rank = 16,
     .legacy = DimValue{1},
     .fallback = [](const ModelSpec&) { return DimValue{1}; },
     .get = [](const TrialConfig& c) { return DimValue{c.virtual_stages}; },
     .set = [](TrialConfig& c, DimValue v) { c.virtual_stages = v; },
     .applies =
         [](const TrialConfig& c) {
             return c.pipeline_parallel > 1 && c.pipeline_schedule == PipelineSchedule::interleaved;
         }},
    {.name = "pipeline_split",
     .flag = "--pipeline-split",
     .header = "split",
     .prefix = "split=",
     .help = "even layers per stage, or Megatron's split counting the embedding (first stage), the loss (last) "
             "or both as a layer: embedding, loss, embedding+loss; pipeline_parallel > 1 only",
     .kind = DimKind::enumeration,
     .choices = kPipelineSplitNames,
     .grid_rank = 17,
     .legacy = index_of(PipelineSplit::even),
     .fallback = [](const ModelSpec&) { return index_of(PipelineSplit::even); },
     .get = [](const TrialConfig& c) { return index_of(c.pipeline_split); },
     .set = [](TrialConfig& c, DimValue v) { c.pipeline_split = kPipelineSplits[v]; },
     .applies = [](const TrialConfig& c) { return c.pipeline_parallel > 1; }},
}};

constexpr std::array<std::size_t, kDimensionCount> make_grid_order() {
    std::array<std::size_t, kDimensionCount> order{};
    for (std::size_t i = 0; i < kDimensionCount; ++i) order[static_cast<std::size_t>(kTable[i].grid_rank)] = i;
    return order;
}
constexpr std::array<std::size_t, kDimensionCount> kGridOrder = make_grid_order();

constexpr bool ranks_are_a_permutation() {
    std::array<bool, kDimensionCount> seen{};
    for (const Dimension& d : kTable) {
        if (d.grid_rank < 0 || static_cast<std::size_t>(d.grid_rank) >= kDimensionCount || seen[d.grid_rank])
            return false;
        seen[d.grid_rank] = true;
    }
    return true;
}
static_assert(ranks_are_a_permutation(), "every dimension needs its own grid_rank, 0 to kDimensionCount - 1");

}  // namespace

std::string Dimension::format(DimValue v) const {
    if (is_enum()) return v < choices.size() ? std::string(choices[v]) : fmt::format("<{} #{}>", name, v);
    return std::to_string(v);
}

std::optional<DimValue> Dimension::parse(std::string_view text) const {
    if (is_enum()) {
        for (std::size_t i = 0; i < choices.size(); ++i)
            if (choices[i] == text) return static_cast<DimValue>(i);
        return std::nullopt;
    }
    std::uint64_t value = 0;
    const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (error != std::errc{} || end != text.data() + text.size() || value < min || value > max) return std::nullopt;
    return static_cast<DimValue>(value);
}

std::string Dimension::allowed() const {
    if (!is_enum()) return fmt::format("{} to {}", min, max);
    std::string out;
    for (std::size_t i = 0; i < choices.size(); ++i)
        out += fmt::format("{}{}", i == 0 ? "" : (i + 1 == choices.size() ? " or " : ", "), choices[i]);
    return out;
}

const std::array<Dimension, kDimensionCount>& dimensions() { return kTable; }
const std::array<std::size_t, kDimensionCount>& grid_order() { return kGridOrder; }

const Dimension* find_dimension(std::string_view name) {
    for (const Dimension& d : kTable)
        if (d.name == name) return &d;
    return nullptr;
}

std::array<std::string, kDimensionCount> dimension_cells(const TrialConfig& c) {
    std::array<std::string, kDimensionCount> cells;
    // A dimension that means nothing for this configuration (a LoRA rank under full fine-tuning) shows
    // a dash, not the default it was collapsed to.
    for (std::size_t i = 0; i < kDimensionCount; ++i) cells[i] = kTable[i].applies_to(c) ? kTable[i].text(c) : "-";
    return cells;
}

}  // namespace tune
