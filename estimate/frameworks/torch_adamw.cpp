// What torch.optim.AdamW's foreach step allocates beyond its states, in the
// stacks whose optimizer it is.
#include <fmt/format.h>

#include "estimate/frameworks/framework_profile.h"
#include "estimate/model_states.h"

namespace tune {
namespace {

// Who runs torch.optim.AdamW on the device, and takes its foreach path:
// - HF Trainer and a torchrun script at ZeRO-0: tune's export writes
//   optim="adamw_torch" (exports/hf_arguments.cpp), which Trainer
//   get_optimizer_cls_and_kwargs builds as torch.optim.AdamW without `fused`;
//   optimizer.py _default_to_fused_or_foreach then picks foreach for CUDA tensors.
//   At ZeRO 1-3 the ds_config's optimizer block runs DeepSpeed's FusedAdam instead.
// - accelerate's FSDP: FSDP2's DTensor parameters take foreach too
//   (torch/distributed/tensor/__init__.py appends DTensor to the optimizer's
//   _foreach_supported_types), and so do FSDP1's use_orig_params originals.
//   FSDP1 under adapters (use_orig_params false) hands it FlatParameters, which
//   it loops over; the profile follows FSDP2, the export's default.
// Offloaded states are updated on the CPU, where AdamW loops tensor by tensor.
// torchtitan's [optimizer] implementation defaults to "fused", which updates in place.
bool runs_foreach_adamw(FrameworkProfile f, const TrialConfig& c) {
    if (c.optimizer != Optimizer::adamw || c.offload != Offload::none) return false;
    if (f == FrameworkProfile::hf_trainer || f == FrameworkProfile::torchrun) return c.zero_stage == 0;
    return f == FrameworkProfile::accelerate_fsdp;
}

}  // namespace

// torch/optim/adam.py _multi_tensor_adam (AdamW's too): after updating the
// moments in place it computes `exp_avg_sq_sqrt = torch._foreach_sqrt(device_exp_avg_sqs)`,
// a new tensor per parameter, all alive until `_foreach_addcdiv_` has updated
// the parameters: one more second moment, this rank's shard of it, in the step.
FrameworkTerm foreach_adamw_term(FrameworkProfile f, const TrialConfig& c) {
    if (!runs_foreach_adamw(f, c)) return {"torch.optim.AdamW's foreach square roots", 0, {}};
    // Our engine's AdamW keeps two moments of one dtype per trained element (estimate/model_states.cpp).
    const std::uint64_t second_moment = trial_states(c.model, c).optim / 2;
    return {fmt::format("torch.optim.AdamW's foreach step: the square root of every second moment at once ({} bytes)",
                        second_moment),
            static_cast<std::int64_t>(second_moment), alive_in({Phase::optimizer_step})};
}

}  // namespace tune
