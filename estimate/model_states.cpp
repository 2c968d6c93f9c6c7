#include "estimate/model_states.h"

#include <algorithm>

#include "core/parallel_plan.h"
#include "kernels/math/nf4.h"

namespace tune {
namespace {

std::uint64_t optimizer_bytes(const BufferKind& kind, std::uint64_t region, const StateSettings& s) {
    const std::uint64_t sb = state_bytes(s.precision);
    switch (s.optimizer) {
        case Optimizer::adamw:
            return 2 * sb * region;
        case Optimizer::lion:
            return sb * region;
        case Optimizer::adam8bit:
            // uint8 codes for m and v over the region, one fp32 absmax per block and
            // state, plus replicated full-width m and v of the small tensors.
            return 2 * region + 2 * 4 * (region / s.adam8bit_block) + 2 * sb * kind.small;
        case Optimizer::adafactor:
            return sb * kind.stats;  // replicated, never sharded
        case Optimizer::lomo:
            return 0;
    }
    return 0;
}

}  // namespace

StateSettings StateSettings::of(const TrialConfig& c) {
    // ZeRO shards over the plan's shard group; each tensor-parallel rank holds its own shard of the model.
    return StateSettings{c.optimizer,
                         c.precision,
                         zero_plan(c.zero_stage),
                         parallel_plan(c).zero_shards(),
                         flat_alignment(c.adam8bit_block),
                         std::max<std::uint64_t>(c.adam8bit_block, 1)};
}

ModelStateBytes model_states(const BufferKind& kind, const StateSettings& s) {
    const std::uint64_t full = full_numel(kind.numel, s.shards, s.align);
    const std::uint64_t shard = shard_numel(kind.numel, s.shards, s.align);
    const std::uint64_t wb = weight_bytes(s.precision);  // gradients share the weights' dtype
    const bool lomo = s.optimizer == Optimizer::lomo;

    ModelStateBytes b;
    b.params = wb * (s.zero.shards_parameters ? shard : full);
    if (has_master_weights(s.precision)) b.master = 4 * (s.zero.shards_master_weights ? shard : full);
    if (!lomo) b.grads = wb * (s.zero.shards_gradients ? shard : full);
    b.optim = optimizer_bytes(kind, s.zero.shards_optimizer_states ? shard : full, s);

    b.params *= kind.count, b.master *= kind.count, b.grads *= kind.count, b.optim *= kind.count;
    return b;
}

ModelStateBytes model_states(const FlatLayout& layout, const StateSettings& s) {
    ModelStateBytes b = model_states(layout.layer, s);
    b += model_states(layout.outer, s);
    return b;
}

std::uint64_t held_numel(std::uint64_t numel, std::uint64_t count, const StateSettings& s, bool sharded) {
    return count * (sharded ? shard_numel(numel, s.shards, s.align) : full_numel(numel, s.shards, s.align));
}

namespace {

std::uint64_t frozen_bytes(const BufferKind& kind, const StateSettings& s) {
    return weight_bytes(s.precision) * held_numel(kind.numel, kind.count, s, s.zero.shards_parameters);
}

}  // namespace

std::uint64_t nf4_layer_bytes(const FlatLayout& layout, const StateSettings& s) {
    const auto n = static_cast<std::int64_t>(full_numel(layout.layer.numel, s.shards, s.align));
    const std::int64_t kept =
        s.zero.shards_parameters ? math::nf4_shard(n, static_cast<std::int64_t>(s.shards)).shard : n;
    return static_cast<std::uint64_t>(math::nf4_sizes(kept).bytes);
}

std::uint64_t nf4_gathered_layer_bytes(const FlatLayout& layout, const StateSettings& s) {
    if (!s.zero.gathers_weights_before_use()) return 0;
    const auto n = static_cast<std::int64_t>(full_numel(layout.layer.numel, s.shards, s.align));
    const math::Nf4Shard shard = math::nf4_shard(n, static_cast<std::int64_t>(s.shards));
    return static_cast<std::uint64_t>(math::nf4_sizes(shard.padded).bytes);
}

FlatLayout local_flat_layout(const TrialConfig& c) {
    return flat_layout(parallel_plan(c).local(c.model), c.adam8bit_block);
}

ModelSpec stage_model(const ModelSpec& local, const PipelineStage& stage) {
    ModelSpec m = local;
    m.layers = stage.layers;
    return m;
}

FlatLayout stage_flat_layout(const ModelSpec& local, const TrialConfig& c, const PipelineStage& stage) {
    return flat_layout(stage_model(local, stage), c.adam8bit_block, OuterParts{stage.embedding, stage.head});
}

ModelStateBytes trial_states(const ModelSpec& model, const TrialConfig& c) {
    return trial_states(model, c, whole_model_stage(static_cast<std::uint32_t>(model.layers)));
}

ModelStateBytes trial_states(const ModelSpec& model, const TrialConfig& c, const PipelineStage& stage) {
    const ModelSpec m = stage_model(parallel_plan(c).local(model), stage);
    const FlatLayout layout = stage_flat_layout(parallel_plan(c).local(model), c, stage);
    const StateSettings s = StateSettings::of(c);
    if (!c.adapters()) return model_states(layout, s);
    ModelStateBytes b = model_states(adapter_buffer(m, c.lora_rank, c.lora_targets, c.adam8bit_block), s);
    if (c.method == Method::lora) {
        b.params += frozen_bytes(layout.layer, s) + frozen_bytes(layout.outer, s);
        return b;
    }
    // qlora: each layer buffer as NF4 plus its vectors (norm weights, biases)
    // in the weights' dtype (whole on every rank); the outer buffer in the weights'
    // dtype. Stage 3 keeps the rank's shard of the NF4 and of the outer buffer.
    b.params += layout.layer.count * (nf4_layer_bytes(layout, s) + m.layer_vector_params() * weight_bytes(s.precision));
    b.params += frozen_bytes(layout.outer, s);
    return b;
}

}  // namespace tune
