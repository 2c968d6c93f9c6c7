#include "search/model_states.h"

#include <algorithm>

namespace tune {
namespace {

std::uint64_t optimizer_bytes(const BufferKind& kind, std::uint64_t region, const StateSettings& s) {
    const std::uint64_t sb = state_bytes(s.precision);
    switch (s.optimizer) {
        case Optimizer::adamw: return 2 * sb * region;
        case Optimizer::lion: return sb * region;
        case Optimizer::adam8bit:
            // uint8 codes for m and v over the region, one fp32 absmax per block and
            // state, plus replicated full-width m and v of the small tensors.
            return 2 * region + 2 * 4 * (region / s.adam8bit_block) + 2 * sb * kind.small;
        case Optimizer::adafactor: return sb * kind.stats;  // replicated, never sharded
        case Optimizer::lomo: return 0;
    }
    return 0;
}

}  // namespace

StateSettings StateSettings::of(const TrialConfig& c) {
    return StateSettings{c.optimizer,          c.precision, zero_plan(c.zero_stage), std::max<std::uint64_t>(c.world_size, 1),
                         flat_alignment(c.adam8bit_block), std::max<std::uint64_t>(c.adam8bit_block, 1)};
}

ModelStateBytes model_states(const BufferKind& kind, const StateSettings& s) {
    const std::uint64_t full = full_numel(kind.numel, s.world_size, s.align);
    const std::uint64_t shard = shard_numel(kind.numel, s.world_size, s.align);
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

}  // namespace tune
