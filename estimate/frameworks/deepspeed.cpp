// What DeepSpeed's ZeRO optimizers hold beyond our engine.
#include <algorithm>

#include <fmt/format.h>

#include "core/parallel_plan.h"
#include "estimate/estimate.h"
#include "estimate/frameworks/framework_profile.h"
#include "estimate/model_flops.h"

namespace tune {

namespace {

// DeepSpeed's default sub_group_size (runtime/zero/config.py): ZeRO-3 steps its
// partition in sub-groups of at most this many elements.
constexpr std::uint64_t kSubGroupElements = 1'000'000'000;
// DeepSpeed's default reduce_bucket_size (runtime/zero/config.py), which tune's
// DeepSpeed export leaves at its default.
constexpr std::uint64_t kReduceBucketElements = 500'000'000;
// ZeRO-3's defaults (runtime/zero/config.py): stage3_prefetch_bucket_size and
// stage3_param_persistence_threshold, both in elements.
constexpr std::uint64_t kPrefetchBucketElements = 50'000'000;
constexpr std::uint64_t kPersistenceThreshold = 100'000;

// The rank's partition of the trained parameters, in elements.
std::uint64_t partition_elements(const TrialConfig& c) {
    const std::uint64_t ranks = std::max<std::uint32_t>(parallel_plan(c).world(), 1);
    return (trained_parameters(c.model, c) + ranks - 1) / ranks;
}

// The most elements of one trained tensor: the embedding or LM head for a full
// fine-tune, an adapter's larger factor under LoRA.
std::uint64_t largest_trained_tensor(const TrialConfig& c) {
    const ModelSpec& m = c.model;
    const std::uint64_t h = m.hidden, widest = std::max<std::uint64_t>({h, m.ffn, m.kv_dim()});
    if (c.adapters()) return static_cast<std::uint64_t>(c.lora_rank) * widest;
    return std::max(static_cast<std::uint64_t>(m.vocab) * h, widest * h);
}

FrameworkTerm whole_step(std::string what, std::uint64_t bytes) {
    return FrameworkTerm{std::move(what), static_cast<std::int64_t>(bytes), kWholeStep};
}

}  // namespace

std::vector<FrameworkTerm> deepspeed_host_terms(const TrialConfig& c) {
    if (c.offload == Offload::none) return {};
    const std::uint64_t n = partition_elements(c), half = weight_bytes(c.precision);
    // ZeRO-3 keeps our engine's host gradient shard, in the model's dtype
    // (stage3.py grad_partitions_flat_buffer: engine.py get_data_types makes
    // grad_accum_dtype the model's), and beside it each sub-group's fp32 master
    // partition has a pinned fp32 .grad for the whole run
    // (initialize_optimizer_states: subgroup_gradient_buffer, which
    // _release_sub_group keeps under offload_optimizer).
    if (c.zero_stage == 3)
        return {whole_step(
            fmt::format("each sub-group's fp32 gradient, beside the {}-byte partition ({} x {} elements)", half, 4, n),
            4 * n)};
    // ZeRO-1/2 keeps it in fp32 instead of our weights' dtype
    // (stage_1_and_2.py initialize_optimizer_states: single_partition_of_fp32_groups .grad).
    std::vector<FrameworkTerm> t{whole_step(
        fmt::format("the fp32 gradient partition ({} bytes x {} elements, ours {})", 4, n, half), (4 - half) * n)};
    // stage_1_and_2.py __init__ (cpu_offload): a 16-bit copy of the partition the
    // update writes before it goes to the device, and a pinned buffer of the
    // largest parameter's gradient; async_accumulate_grad_in_cpu_via_gpu keeps
    // each partition parameter's gradient on the host between micro-batches.
    t.push_back(whole_step(fmt::format("the 16-bit parameter partition the update writes ({} x {} elements)", half, n),
                           half * n));
    const std::uint64_t largest = largest_trained_tensor(c);
    t.push_back(whole_step(fmt::format("the largest parameter's gradient, pinned ({} x {} elements)", half, largest),
                           half * largest));
    if (c.grad_accum > 1)
        t.push_back(whole_step(
            fmt::format("each partition parameter's gradient between micro-batches ({} x {} elements)", half, n),
            half * n));
    return t;
}

FrameworkTerm deepspeed_offload_device_term(const TrialConfig& c) {
    if (c.offload == Offload::none || c.zero_stage == 3) return {};
    // stage_1_and_2.py temp_grad_buffer_for_gpu_offload: the largest parameter's gradient on the device.
    const std::uint64_t largest = largest_trained_tensor(c), half = weight_bytes(c.precision);
    return whole_step(
        fmt::format("ZeRO-Offload's device staging of the largest gradient ({} x {} elements)", half, largest),
        half * largest);
}

FrameworkTerm deepspeed_bucket_term(const TrialConfig& c) {
    FrameworkTerm t;
    if (c.zero_stage == 0) return t;
    // contiguous_gradients (on by default) copies each gradient into a flat
    // bucket of reduce_bucket_size elements in the 16-bit dtype. ZeRO-1 and 2
    // (stage_1_and_2.py setup_buckets) allocate it at a backward's first gradient
    // and release it in its epilogue, one buffer as overlap_comm is off below
    // stage 3; ZeRO-3 (stage3.py __init__, the IPG buckets) allocates it once,
    // beside the optimizer states, for the whole run. Our engine's own bucket
    // stands for the gradients autograd makes before DeepSpeed copies them.
    const std::uint64_t wb = weight_bytes(c.precision);
    t.bytes = static_cast<std::int64_t>(kReduceBucketElements * wb);
    t.what = fmt::format("ZeRO-{}'s contiguous gradient bucket (reduce_bucket_size {} x {} bytes){}", c.zero_stage,
                         kReduceBucketElements, wb, c.zero_stage == 3 ? ", for the whole run" : ", during backward");
    t.alive =
        c.zero_stage == 3 ? kWholeStep : alive_in({Phase::head_backward, Phase::layer_backward, Phase::embed_backward});
    return t;
}

FrameworkTerm deepspeed_gradient_term(const TrialConfig& c) {
    FrameworkTerm t;
    t.alive[static_cast<std::size_t>(Phase::optimizer_step)] = true;
    // Offloaded, the reduced gradients go straight into the host's fp32 partition
    // (stage_1_and_2.py async_inplace_copy_grad_to_fp32_buffer_from_gpu): no copy on the device.
    if (c.offload != Offload::none) return t;
    if (c.zero_stage == 0) {
        // Without ZeRO a 16-bit model's step is FP16_Optimizer's (engine.py
        // _do_optimizer_sanity_check: FP16, or DDP_BFLOAT16 for bf16; fp32 runs the
        // bare optimizer). fp16/fused_optimizer.py step() casts every gradient to fp32
        // in one list, flattens the list into the fp32 master's .grad, and only then
        // lets the casts go: 4 + 4 bytes a trained element at the flatten.
        if (c.precision == Precision::fp32) return t;
        const std::uint64_t elements = trained_parameters(c.model, c);
        t.bytes = static_cast<std::int64_t>(8 * elements);
        t.what = fmt::format(
            "FP16_Optimizer's step without ZeRO: every gradient cast to fp32, then flattened (4 + 4 bytes x {} "
            "elements)",
            elements);
        return t;
    }
    // At the optimizer step stage_1_and_2.py step() flattens the rank's averaged
    // gradients (a 16-bit copy) and casts them to fp32 for the fp32 master
    // partition; stage3.py _prepare_fp32_grad_for_sub_group does the same per
    // sub-group. Both copies live at the cast, only during the step, at ZeRO-1 too.
    std::uint64_t elements = partition_elements(c);
    if (c.zero_stage == 3) elements = std::min(elements, kSubGroupElements);
    const std::uint64_t flat = weight_bytes(c.precision), cast = c.precision == Precision::fp32 ? 0 : 4;
    t.bytes = static_cast<std::int64_t>(elements * (flat + cast));
    t.what = fmt::format(
        "ZeRO-{}'s flattened gradient partition and its fp32 cast at the optimizer step "
        "({} + {} bytes x {} elements)",
        c.zero_stage, flat, cast, elements);
    return t;
}

namespace {

// The elements of a layer's largest base tensor as DeepSpeed counts them: a
// QLoRA weight is bitsandbytes' packed storage, four NF4 codes a 16-bit element.
std::uint64_t largest_layer_tensor(const TrialConfig& c) {
    const ModelSpec& m = c.model;
    const std::uint64_t widest = std::max<std::uint64_t>({m.q_dim(), m.kv_dim(), m.ffn}) * m.hidden;
    return c.method == Method::qlora ? widest / 4 : widest;
}

// Tensors of at most stage3_param_persistence_threshold elements, per layer and
// outside the layers: the norms, biases and q/k norms, and the adapters' factors
// that small.
std::uint64_t persistent_elements(const TrialConfig& c) {
    const ModelSpec& m = c.model;
    std::uint64_t adapters = 0;
    for (const Linear& l : layer_linears(m, c))
        for (const double factor : {l.rank * l.in, l.out * l.rank})
            if (l.rank > 0 && factor <= static_cast<double>(kPersistenceThreshold))
                adapters += static_cast<std::uint64_t>(factor);
    return m.layers * (m.layer_vector_params() + adapters) + m.hidden;
}

}  // namespace

std::vector<FrameworkTerm> deepspeed_zero3_parameter_terms(const TrialConfig& c) {
    if (c.zero_stage != 3) return {};
    const std::uint64_t wb = weight_bytes(c.precision), ranks = std::max<std::uint32_t>(parallel_plan(c).world(), 1);
    // partitioned_param_coordinator.py fetch_sub_module: as a module runs, the
    // parameters of the modules the trace says come next are all-gathered until
    // stage3_prefetch_bucket_size elements are in flight, the last one whole.
    // In backward the recomputed layer stays gathered (each parameter is used
    // again within stage3_max_reuse_distance), as our engine's one layer does; the
    // prefetch comes beside it. In forward DeepSpeed holds a module and its
    // prefetch, less than our engine's layer, which the term does not subtract.
    const std::uint64_t prefetch = std::max(kPrefetchBucketElements, largest_layer_tensor(c));
    FrameworkTerm ahead{fmt::format("ZeRO-3's prefetched parameters (stage3_prefetch_bucket_size {} elements, "
                                    "the last tensor whole: {} x {} bytes)",
                                    kPrefetchBucketElements, prefetch, wb),
                        static_cast<std::int64_t>(prefetch * wb),
                        alive_in({Phase::head_backward, Phase::layer_backward, Phase::embed_backward})};
    // parameter_offload.py mark_persistent_parameters: a tensor of at most
    // stage3_param_persistence_threshold elements is never partitioned: whole on
    // every rank, where our engine keeps its shard.
    const std::uint64_t persistent = persistent_elements(c);
    const std::uint64_t beyond_shard = persistent - persistent / ranks;
    return {ahead,
            whole_step(fmt::format("ZeRO-3's persistent small tensors, whole on every rank ({} elements of at most {})",
                                   persistent, kPersistenceThreshold),
                       beyond_shard * wb)};
}

}  // namespace tune
