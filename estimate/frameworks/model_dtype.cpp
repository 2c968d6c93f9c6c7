// The dtype each stack keeps the model's weights and gradients in, where it is
// not our engine's (16-bit weights and gradients beside an fp32 master), and
// the stack each configuration runs under.
#include <fmt/format.h>

#include "core/parallel_plan.h"
#include "estimate/estimate.h"
#include "estimate/frameworks/framework_profile.h"
#include "estimate/model_states.h"

namespace tune {

FrameworkProfile stack_rules(FrameworkProfile f, const TrialConfig& c) {
    // exports/trainer_export.cpp: at ZeRO 1-3 HF Trainer's arguments (and the
    // torchrun script's) name ds_config.json, and DeepSpeed's engine runs the model.
    if ((f == FrameworkProfile::hf_trainer || f == FrameworkProfile::torchrun) && c.zero_stage > 0)
        return FrameworkProfile::deepspeed;
    // exports/accelerate_config.cpp: ZeRO-0 is accelerate's MULTI_GPU (FSDP1 and
    // FSDP2 alike), Trainer under DDP and autocast as HF Trainer runs it.
    if (f == FrameworkProfile::accelerate_fsdp && c.zero_stage == 0) return FrameworkProfile::hf_trainer;
    return f;
}

bool holds_fp32_model(FrameworkProfile r, const TrialConfig& c, BaseDtype base) {
    if (!has_master_weights(c.precision)) return false;
    // DeepSpeed's engine casts the whole module to 16 bits (engine.py
    // _configure_distributed_model: module.bfloat16() or half()); torchtitan and
    // LitGPT build their own models.
    const bool trainer = r == FrameworkProfile::hf_trainer || r == FrameworkProfile::torchrun;
    if (!trainer && r != FrameworkProfile::accelerate_fsdp) return false;
    // autocast (Trainer) and FSDP's MixedPrecision cast fp32 weights for compute.
    if (c.method == Method::full) return true;
    // peft.prepare_model_for_kbit_training (utils/other.py), which the export has an
    // unsharded QLoRA call, upcasts every parameter but Params4bit to fp32.
    if (c.method == Method::qlora && trainer) return true;
    return base == BaseDtype::fp32;
}

namespace {

// Elements of the frozen base our engine keeps in 16 bits on a rank
// (model_states.cpp trial_states): the whole base under LoRA; the embedding, head
// and the layers' vectors beside QLoRA's NF4. `sharded`: the rank's shard of each buffer.
std::uint64_t frozen_16bit_elements(const TrialConfig& c, bool sharded) {
    const FlatLayout layout = local_flat_layout(c);
    const StateSettings s = StateSettings::of(c);
    const std::uint64_t per_layer = c.method == Method::lora ? layout.layer.numel : c.model.layer_vector_params();
    return held_numel(per_layer, layout.layer.count, s, sharded) +
           held_numel(layout.outer.numel, layout.outer.count, s, sharded);
}

// An fp32 frozen base where our engine keeps 16 bits: 2 more bytes an element,
// held from the load to the end. Trainer keeps the model whole; FSDP at FULL_SHARD
// keeps the rank's fp32 shard of each FlatParameter (its all-gather casts to
// param_dtype, which the gather terms count) and at SHARD_GRAD_OP that shard beside
// the 16-bit copy our engine's whole base stands for.
FrameworkTerm fp32_base_term(FrameworkProfile r, const TrialConfig& c) {
    const bool fsdp = r == FrameworkProfile::accelerate_fsdp;
    const std::uint64_t wb = weight_bytes(c.precision);
    const std::uint64_t bytes = !fsdp               ? (4 - wb) * frozen_16bit_elements(c, false)
                                : c.zero_stage == 3 ? (4 - wb) * frozen_16bit_elements(c, true)
                                                    : 4 * frozen_16bit_elements(c, true);
    return {fmt::format("the frozen base in fp32, as the model loads (torch_dtype=torch.float32){}",
                        fsdp ? ": FSDP's sharded FlatParameters" : ""),
            static_cast<std::int64_t>(bytes), kWholeStep};
}

// DDP's Reducer (torch/csrc/distributed/c10d/reducer.cpp initialize_buckets)
// allocates a flat bucket for every trainable parameter's gradient when it wraps
// the model, and with gradient_as_bucket_view false (accelerate's
// DistributedDataParallelKwargs default, which Trainer's ddp kwargs leave) each
// gradient is copied into it: a second set of gradients in the parameters' dtype,
// for the whole run. Our engine all-reduces its gradient buffers in place.
FrameworkTerm ddp_bucket_term(FrameworkProfile r, const TrialConfig& c, BaseDtype base) {
    FrameworkTerm t{"DDP's gradient buckets, a copy of every trainable gradient", 0, kWholeStep};
    const bool trainer = r == FrameworkProfile::hf_trainer || r == FrameworkProfile::torchrun;
    if (!trainer || c.zero_stage != 0 || parallel_plan(c).world() <= 1) return t;
    const std::uint64_t elements = trained_parameters(c.model, c);
    // PEFT keeps adapters in fp32 under Trainer (get_peft_model's autocast_adapter_dtype).
    const std::uint64_t bytes = c.adapters() || holds_fp32_model(r, c, base) ? 4 : weight_bytes(c.precision);
    t.what = fmt::format("{} ({} elements x {} bytes, gradient_as_bucket_view false)", t.what, elements, bytes);
    t.bytes = static_cast<std::int64_t>(elements * bytes);
    return t;
}

}  // namespace

std::vector<FrameworkTerm> model_dtype_terms(FrameworkProfile r, const TrialConfig& c, BaseDtype base) {
    std::vector<FrameworkTerm> terms;
    if (c.adapters() && holds_fp32_model(r, c, base)) terms.push_back(fp32_base_term(r, c));
    if (FrameworkTerm t = ddp_bucket_term(r, c, base); t.bytes > 0) terms.push_back(std::move(t));
    return terms;
}

}  // namespace tune
