// What PyTorch's FSDP (FULL_SHARD through accelerate, FSDP2 under torchtitan)
// keeps gathered beyond our engine, which at ZeRO-3 gathers one layer at a time
// and the outer buffer only where the head reads it.
#include <fmt/format.h>

#include "core/flat_buffer.h"
#include "core/tensor_parallel.h"
#include "search/flat_layout.h"
#include "search/frameworks/framework_profile.h"
#include "search/model_states.h"

namespace tune {

namespace {

// Under tensor parallelism (torchtitan) FSDP shards each rank's local matrices.
FlatLayout local_layout(const TrialConfig& c) {
    return flat_layout(tensor_parallel_plan(c).local(c.model), c.adam8bit_block);
}

}  // namespace

std::uint64_t fsdp_gathered_layer_bytes(const TrialConfig& c) {
    const StateSettings s = StateSettings::of(c);
    const FlatLayout layout = local_layout(c);
    return c.method == Method::qlora
               ? nf4_gathered_layer_bytes(layout, s)
               : full_numel(layout.layer.numel, s.world_size, s.align) * weight_bytes(c.precision);
}

std::vector<FrameworkTerm> fsdp_gather_terms(const TrialConfig& c) {
    if (c.zero_stage != 3) return {};  // SHARD_GRAD_OP and NO_SHARD keep every weight whole, as our engine does
    const StateSettings s = StateSettings::of(c);
    const std::uint64_t root =
        full_numel(local_layout(c).outer.numel, s.world_size, s.align) * weight_bytes(c.precision);
    const std::uint64_t layer = fsdp_gathered_layer_bytes(c);
    // torch/distributed/fsdp/_runtime_utils.py _post_forward_reshard: the root unit
    // (the embedding, final norm and head, outside every wrapped decoder layer) is not
    // resharded after forward, "with the intention that they are immediately used for
    // backward": it stays gathered from the forward's embedding to the backward's end.
    // FSDP2 does the same (the root's post-forward mesh is None). Our engine gathers
    // it for the head only, where it is already counted.
    // _pre_backward_hook's _prefetch_handle(BACKWARD): with BACKWARD_PRE (accelerate's
    // fsdp_backward_prefetch, FSDP1's default; FSDP2 always prefetches) the next unit's
    // all-gather is issued as a unit's backward starts, so two layers are gathered there.
    return {{fmt::format(
                 "the root unit (embedding, final norm, head) kept gathered from forward to backward ({} bytes)", root),
             static_cast<std::int64_t>(root), alive_in({Phase::forward, Phase::layer_backward, Phase::embed_backward})},
            {fmt::format("the next decoder layer, prefetched during a layer's backward ({} bytes)", layer),
             static_cast<std::int64_t>(layer), alive_in({Phase::layer_backward})}};
}

}  // namespace tune
