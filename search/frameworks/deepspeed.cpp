// What DeepSpeed's ZeRO optimizers hold beyond our engine.
#include <algorithm>

#include <fmt/format.h>

#include "search/estimate.h"
#include "search/frameworks/framework_profile.h"

namespace tune {

namespace {

// DeepSpeed's default sub_group_size (runtime/zero/config.py): ZeRO-3 steps its
// partition in sub-groups of at most this many elements.
constexpr std::uint64_t kSubGroupElements = 1'000'000'000;

}  // namespace

FrameworkTerm deepspeed_gradient_term(const TrialConfig& c) {
    FrameworkTerm t;
    t.alive[static_cast<std::size_t>(Phase::optimizer_step)] = true;
    // Offloaded, the reduced gradients go straight into the host's fp32 partition
    // (stage_1_and_2.py async_inplace_copy_grad_to_fp32_buffer_from_gpu): no copy on the device.
    if (c.zero_stage == 0 || c.offload != Offload::none) return t;
    // At the optimizer step stage_1_and_2.py step() flattens the rank's averaged
    // gradients (a 16-bit copy) and casts them to fp32 for the fp32 master
    // partition; stage3.py _prepare_fp32_grad_for_sub_group does the same per
    // sub-group. Both copies live at the cast, only during the step, at ZeRO-1 too.
    const std::uint64_t ranks = std::max<std::uint32_t>(c.world_size, 1);
    std::uint64_t elements = (trained_parameters(c.model, c) + ranks - 1) / ranks;
    if (c.zero_stage == 3) elements = std::min(elements, kSubGroupElements);
    const std::uint64_t flat = weight_bytes(c.precision), cast = c.precision == Precision::fp32 ? 0 : 4;
    t.bytes = static_cast<std::int64_t>(elements * (flat + cast));
    t.what = fmt::format(
        "ZeRO-{}'s flattened gradient partition and its fp32 cast at the optimizer step "
        "({} + {} bytes x {} elements)",
        c.zero_stage, flat, cast, elements);
    return t;
}

}  // namespace tune
