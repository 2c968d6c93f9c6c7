// What PyTorch's FSDP (FULL_SHARD through accelerate, FSDP2 under torchtitan)
// keeps gathered beyond our engine, which at ZeRO-3 gathers one layer at a time
// and the outer buffer only where the head reads it, and the gradients it holds
// beyond our engine's buckets, which reduce-scatter each layer as it finishes.
#include <algorithm>

#include <fmt/format.h>

#include "core/flat_buffer.h"
#include "core/parallel_plan.h"
#include "estimate/flat_layout.h"
#include "estimate/frameworks/framework_profile.h"
#include "estimate/model_states.h"
#include "kernels/math/nf4.h"

namespace tune {

// Under tensor parallelism (torchtitan) FSDP shards each rank's local matrices: local_flat_layout.

std::uint64_t fsdp_gathered_layer_bytes(const TrialConfig& c) {
    const StateSettings s = StateSettings::of(c);
    const FlatLayout layout = local_flat_layout(c);
    return c.method == Method::qlora ? nf4_gathered_layer_bytes(layout, s)
                                     : full_numel(layout.layer.numel, s.shards, s.align) * weight_bytes(c.precision);
}

std::vector<FrameworkTerm> fsdp_gather_terms(const TrialConfig& c) {
    if (c.zero_stage != 3) return {};  // SHARD_GRAD_OP and NO_SHARD keep every weight whole, as our engine does
    const StateSettings s = StateSettings::of(c);
    const std::uint64_t root =
        full_numel(local_flat_layout(c).outer.numel, s.shards, s.align) * weight_bytes(c.precision);
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

std::vector<FrameworkTerm> fsdp_offload_cached_terms(const TrialConfig& c, bool fp32_shards) {
    if (c.offload != Offload::optimizer_params) return {};
    const StateSettings s = StateSettings::of(c);
    const FlatLayout layout = local_flat_layout(c);
    // Under CPU offload FSDP copies a unit's shard to the device before its all-gather:
    // FSDP1 on its pre-unshard stream (_runtime_utils.py _unshard, FlatParamHandle.pre_unshard's
    // flat_param_to(device), which _init_streams gives "allocations and writes for CPU offloading"),
    // FSDP2 on its copy-in stream (FSDPParam.all_gather_inputs, before foreach_all_gather's
    // copy-in). The copy dies once the all-gather has it, but PyTorch's caching allocator keeps a
    // block for the stream it was made on, where the compute stream's tensors never reuse it: the
    // largest unit's copy stays reserved. QLoRA's decoder layers are their NF4 codes; the root unit (embedding,
    // final norm, head) is in the dtype the shards are kept in.
    const std::uint64_t weight = fp32_shards ? 4 : weight_bytes(c.precision);
    const std::uint64_t root = weight * held_numel(layout.outer.numel, 1, s, true);
    const std::uint64_t layer_shard = held_numel(layout.layer.numel, 1, s, true);
    const std::uint64_t layer =
        c.method == Method::qlora
            ? static_cast<std::uint64_t>(math::nf4_sizes(static_cast<std::int64_t>(layer_shard)).packed)
            : weight * layer_shard;
    const std::uint64_t largest = std::max(root, layer);
    return {{fmt::format("the largest unit's shard ({} bytes), copied from the host on FSDP's own stream", largest),
             static_cast<std::int64_t>(largest), kWholeStep}};
}

namespace {

// SHARD_GRAD_OP (FSDP2: reshard_after_forward false) keeps each FlatParameter's
// shard in the dtype the model loaded in beside the gathered 16-bit copy our
// engine's whole weights stand for, and its gradient shard in that dtype too
// (_runtime_utils.py _post_reduce_grad_callback casts the reduced shard to the
// parameter's). Under mixed precision the fp32 shard is our engine's master and
// the fp32 gradient shard 2 bytes over our engine's 16-bit one; otherwise the
// shard is the extra. After the last backward _should_free_in_backward frees the
// gathered copy, so the optimizer step holds none of our engine's whole weights.
// (At FULL_SHARD the fp32 shard alone stands for our engine's 16-bit shard and
// master, and its fp32 gradient for the rest: they even out.)
std::vector<FrameworkTerm> shard_grad_op_terms(const TrialConfig& c) {
    const StateSettings s = StateSettings::of(c);
    const FlatLayout layout = local_flat_layout(c);
    const auto held = [&](bool sharded) {
        return held_numel(layout.layer.numel, layout.layer.count, s, sharded) +
               held_numel(layout.outer.numel, layout.outer.count, s, sharded);
    };
    const std::uint64_t shard = held(true);
    const bool mixed = has_master_weights(c.precision);
    const std::uint64_t wb = weight_bytes(c.precision);
    const std::uint64_t whole = wb * held(false);
    return {{mixed ? "SHARD_GRAD_OP's fp32 gradient shards, 2 bytes a parameter over our engine's 16-bit ones"
                   : "SHARD_GRAD_OP's parameter shards, beside the gathered weights",
             static_cast<std::int64_t>((mixed ? 2 : wb) * shard), kWholeStep},
            {"SHARD_GRAD_OP's gathered weights, freed after the last backward", -static_cast<std::int64_t>(whole),
             alive_in({Phase::optimizer_step})}};
}

}  // namespace

std::vector<FrameworkTerm> fsdp_gradient_terms(const TrialConfig& c, bool fsdp2_fp32_reduce) {
    // NO_SHARD all-reduces whole gradients, as our engine's ZeRO-0 and 1; frozen
    // bases give FSDP only the adapters' small gradients to hold.
    if (c.zero_stage < 2 || c.adapters()) return {};
    const ModelSpec m = parallel_plan(c).local(c.model);
    const StateSettings s = StateSettings::of(c);
    // FSDP1 reduce-scatters a unit's flat gradient in the post-backward hook of its
    // FlatParameter (_runtime_utils.py _post_backward_hook), which fires once every
    // part has its gradient; FSDP2 runs the root's post_backward from
    // _root_post_backward_final_callback. The root unit's parameters include the
    // embedding, whose gradient comes last, so the head's whole gradient stays from
    // the head's backward to the end; our engine reduce-scatters it at once.
    std::vector<FrameworkTerm> terms{{"the head's whole gradient, held until the root unit's post-backward",
                                      static_cast<std::int64_t>(m.vocab * m.hidden * weight_bytes(c.precision)),
                                      alive_in({Phase::layer_backward, Phase::embed_backward})}};
    if (c.zero_stage == 2)
        for (FrameworkTerm& t : shard_grad_op_terms(c)) terms.push_back(std::move(t));
    // FSDP2's foreach_reduce copies a unit's gradients into a reduce-scatter input of
    // the reduce dtype, and FSDPParamGroup.post_backward keeps it (ReduceScatterState)
    // until the next unit's post-backward: one layer's, in fp32 under torchtitan
    // (mixed_precision_reduce), beside the layer our engine's bucket holds.
    if (fsdp2_fp32_reduce) {
        const std::uint64_t layer = full_numel(local_flat_layout(c).layer.numel, s.shards, s.align);
        terms.push_back({"the previous layer's fp32 reduce-scatter input (ReduceScatterState)",
                         static_cast<std::int64_t>(4 * layer),
                         alive_in({Phase::layer_backward, Phase::embed_backward})});
    }
    return terms;
}

}  // namespace tune
