#include "exports/deepspeed_config.h"

#include <cmath>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/optimizer_hyperparameters.h"
#include "core/parallel_plan.h"
#include "core/units.h"
#include "estimate/estimate.h"
#include "exports/framework.h"
#include "exports/framework_checkpointing.h"
#include "exports/hf_arguments.h"

namespace tune {
namespace {

using json = nlohmann::json;

// The optimizer block for DeepSpeed's own optimizers (runtime/config.py's
// type names), with every hyperparameter tune ran: DeepSpeed's Lion defaults
// to beta2 0.999 where tune's is 0.99. Null for the optimizers the script
// builds and passes to deepspeed.initialize(optimizer=...).
json optimizer_block(const TrialConfig& c) {
    const OptimizerHyperparameters h = optimizer_hyperparameters(c);
    json params{{"lr", h.lr}, {"betas", {h.beta1, h.beta2}}, {"weight_decay", h.weight_decay}};
    switch (c.optimizer) {
        case Optimizer::adamw:
            params["eps"] = h.eps;
            return {{"type", "AdamW"}, {"params", params}};
        case Optimizer::lion:
            return {{"type", "Lion"}, {"params", params}};
        default:
            return nullptr;
    }
}

// 8-bit Adam and Adafactor come from the script. DeepSpeed's engine asserts
// on a client optimizer it has not tested under ZeRO (runtime/engine.py,
// zero_allow_untested_optimizer); HF Trainer sets the flag itself, a plain script does not.
void client_optimizer(const TrialConfig& c, json& ds, FrameworkExport& e) {
    const OptimizerHyperparameters h = optimizer_hyperparameters(c);
    if (c.zero_stage > 0) ds["zero_allow_untested_optimizer"] = true;
    if (c.optimizer == Optimizer::adam8bit)
        e.in_script.push_back(fmt::format(
            "8-bit Adam: optimizer = bitsandbytes.optim.AdamW8bit(model.parameters(), lr={}, betas=({}, {}), eps={}, "
            "weight_decay={}); deepspeed.initialize(model=model, optimizer=optimizer, config=\"ds_config.json\")",
            h.lr, h.beta1, h.beta2, h.eps, h.weight_decay));
    if (c.optimizer == Optimizer::adafactor) {
        e.in_script.push_back(fmt::format(
            "Adafactor: {}; deepspeed.initialize(model=model, optimizer=optimizer, config=\"ds_config.json\")",
            adafactor_construction(c)));
        if (const auto difference = deepspeed_zero_optimizer_difference(c)) {
            e.cannot_express.push_back(*difference);
            e.memory_added.push_back(
                "Adafactor under ZeRO: the unfactored second moment, 4 bytes per parameter / N, where tune keeps "
                "rows + columns per matrix");
        }
    }
}

// DeepSpeed's dynamic loss scaling (runtime/fp16/loss_scaler.py,
// DynamicLossScaler) with tune's policy: hysteresis 1 halves on the first
// overflow (DeepSpeed's default 2 waits for a second), the window, the floor.
json fp16_block(const TrialConfig& c) {
    return {{"enabled", true},
            {"loss_scale", 0},
            {"initial_scale_power", static_cast<int>(std::lround(std::log2(c.loss_scale_init)))},
            {"loss_scale_window", c.loss_scale_window},
            {"hysteresis", 1},
            {"min_loss_scale", 1}};
}

json precision_block(const TrialConfig& c, json& ds, FrameworkExport& e) {
    if (c.precision == Precision::fp16_mixed) return ds["fp16"] = fp16_block(c);
    if (c.precision == Precision::bf16_mixed) return ds["bf16"] = {{"enabled", true}};
    if (c.precision != Precision::bf16) return nullptr;
    if (c.zero_stage == 0) {
        e.cannot_express.push_back(
            "pure bf16 at ZeRO-0: DeepSpeed's bf16 without ZeRO keeps fp32 master weights and optimizer states "
            "(+4 bytes per parameter and fp32 states)");
        return ds["bf16"] = {{"enabled", true}};
    }
    // DeepSpeed 0.18.3 and later keep master weights, gradients and optimizer states in bf16 (ZeRO 1-3).
    return ds["bf16"] = {{"enabled", true}, {"bf16_master_weights_and_grads", true}, {"bf16_optimizer_states", true}};
}

void checkpointing(const TrialConfig& c, json& ds, FrameworkExport& e) {
    const FrameworkCheckpointing ckpt = framework_checkpointing(c);
    if (!ckpt.note.empty()) e.cannot_express.push_back(ckpt.note);
    if (!ckpt.whole_layers) return;
    ds["activation_checkpointing"] = {
        {"partition_activations", false}, {"contiguous_memory_optimization", false}, {"cpu_checkpointing", false}};
    e.in_script.push_back(
        "activation checkpointing: model.gradient_checkpointing_enable() (or deepspeed.checkpointing.checkpoint per "
        "layer); the block above only configures it");
}

// runtime/zero/offload_config.py: offload_optimizer (stages 1-3) and offload_param (stage 3), pinned.
void offload(const TrialConfig& c, json& ds, FrameworkExport& e) {
    if (c.offload == Offload::none) return;
    const json cpu{{"device", "cpu"}, {"pin_memory", true}};
    ds["zero_optimization"]["offload_optimizer"] = cpu;
    if (c.offload == Offload::optimizer_params) ds["zero_optimization"]["offload_param"] = cpu;
    // The host's terms are the profile's (estimate/frameworks/deepspeed.cpp), so the note and the estimate agree.
    if (!c.model.sized()) return;
    for (const FrameworkTerm& t : deepspeed_host_terms(c))
        e.memory_added.push_back(fmt::format("offload, host memory beyond tune's engine: {}: {} per rank", t.what,
                                             format_bytes(static_cast<std::uint64_t>(t.bytes))));
}

void memory_notes(const TrialConfig& c, FrameworkExport& e) {
    if (!c.model.sized()) return;
    const FrameworkTerm grads = deepspeed_gradient_term(c);
    if (grads.bytes > 0)
        e.memory_added.push_back(
            fmt::format("{}: {} per rank during the step (tune estimate --framework deepspeed "
                        "adds it)",
                        grads.what, format_bytes(static_cast<std::uint64_t>(grads.bytes))));
    const FrameworkTerm bucket = deepspeed_bucket_term(c);
    if (bucket.bytes > 0)
        e.memory_added.push_back(fmt::format("{}: {} per rank (tune estimate --framework deepspeed adds it)",
                                             bucket.what, format_bytes(static_cast<std::uint64_t>(bucket.bytes))));
}

}  // namespace

std::optional<std::string> deepspeed_zero_optimizer_difference(const TrialConfig& c) {
    if (c.optimizer != Optimizer::adafactor || c.zero_stage == 0) return std::nullopt;
    return "Adafactor under ZeRO: DeepSpeed hands the optimizer flat 1-D partitions, so its second moment is "
           "unfactored and its update RMS and clipping run per partition: not the update tune measured";
}

FrameworkExport deepspeed_export(const TrialConfig& c) {
    FrameworkExport e;
    e.json = true;
    json ds{{"train_micro_batch_size_per_gpu", c.micro_batch},
            {"gradient_accumulation_steps", c.grad_accum},
            {"train_batch_size", std::uint64_t{c.micro_batch} * c.grad_accum * parallel_plan(c).world()},
            {"zero_optimization", {{"stage", c.zero_stage}}},
            {"steps_per_print", 10}};
    if (c.clip > 0) ds["gradient_clipping"] = c.clip;
    precision_block(c, ds, e);
    if (json opt = optimizer_block(c); !opt.is_null())
        ds["optimizer"] = opt;
    else
        client_optimizer(c, ds, e);
    checkpointing(c, ds, e);
    offload(c, ds, e);
    if (c.neftune_alpha > 0)
        e.cannot_express.push_back("NEFTune: not a DeepSpeed setting (HF Trainer: neftune_noise_alpha)");
    memory_notes(c, e);
    e.body = ds.dump(2);
    return e;
}

}  // namespace tune
