#include "exports/hf_arguments.h"

#include <fmt/format.h>

#include "core/optimizer_hyperparameters.h"
#include "core/units.h"
#include "exports/framework_checkpointing.h"
#include "exports/framework_export.h"

namespace tune {
namespace {

// TrainingArguments' `optim` names (transformers.training_args.OptimizerNames).
// Adafactor has none that matches: see adafactor_script.
std::string optim_name(Optimizer o) {
    switch (o) {
        case Optimizer::adamw:
            return "adamw_torch";
        case Optimizer::lion:
            return "lion_32bit";
        case Optimizer::adam8bit:
            return "adamw_bnb_8bit";
        case Optimizer::adafactor:
            return "adafactor";
        case Optimizer::lomo:
            return "lomo";
    }
    return "adamw_torch";
}

// transformers' Trainer.get_optimizer_cls_and_kwargs builds optim="adafactor"
// with scale_parameter=False, relative_step=False and the fixed learning
// rate; tune runs transformers.optimization.Adafactor's own defaults.
std::string adafactor_script(const TrialConfig& c) {
    return fmt::format(
        "Adafactor as tune ran it: {}; Trainer(..., optimizers=(optimizer, "
        "transformers.optimization.AdafactorSchedule(optimizer))) (optim=\"adafactor\" would fix the learning rate "
        "and turn off parameter scaling)",
        adafactor_construction(c));
}

}  // namespace

std::string adafactor_construction(const TrialConfig& c) {
    return fmt::format(
        "optimizer = transformers.optimization.Adafactor(model.parameters(), lr=None, "
        "scale_parameter=True, relative_step=True, warmup_init=False, weight_decay={})",
        c.weight_decay);
}

void add_notes(FrameworkExport& e, const HfNotes& notes) {
    e.cannot_express.insert(e.cannot_express.end(), notes.cannot.begin(), notes.cannot.end());
    e.in_script.insert(e.in_script.end(), notes.in_script.begin(), notes.in_script.end());
}

void note_foreach_adamw(FrameworkProfile f, const TrialConfig& c, FrameworkExport& e) {
    if (!c.model.sized()) return;
    const FrameworkTerm t = foreach_adamw_term(f, c);
    if (t.bytes <= 0) return;
    e.memory_added.push_back(fmt::format(
        "torch.optim.AdamW's foreach step allocates the square root of every second moment at once: {} per rank in "
        "the optimizer step (tune estimate --framework {} adds it; optim=\"adamw_torch_fused\" updates in place)",
        format_bytes(static_cast<std::uint64_t>(t.bytes)), to_string(f)));
}

HfArguments hf_arguments(const TrialConfig& c, HfNotes& notes) {
    const OptimizerHyperparameters h = optimizer_hyperparameters(c);
    HfArguments a;
    a["output_dir"] = "out";
    a["per_device_train_batch_size"] = c.micro_batch;
    a["gradient_accumulation_steps"] = c.grad_accum;
    if (c.optimizer == Optimizer::adafactor)
        notes.in_script.push_back(adafactor_script(c));
    else
        a["optim"] = optim_name(c.optimizer);
    // Every hyperparameter tune used, so no framework default stands in (bitsandbytes' Lion: beta2 0.999).
    a["learning_rate"] = c.lr;
    a["lr_scheduler_type"] = "constant";  // tune's learning rate is constant, with no warm-up
    a["warmup_steps"] = 0;
    a["weight_decay"] = c.weight_decay;
    if (c.optimizer != Optimizer::adafactor && c.optimizer != Optimizer::lomo) {
        a["adam_beta1"] = h.beta1;  // transformers passes them to Lion as its betas too
        a["adam_beta2"] = h.beta2;
        if (c.optimizer != Optimizer::lion) a["adam_epsilon"] = h.eps;
    }
    a["max_grad_norm"] = c.clip;
    a["seed"] = c.seed;
    if (c.precision == Precision::bf16_mixed || c.precision == Precision::bf16) a["bf16"] = true;
    if (c.precision == Precision::fp16_mixed) {
        a["fp16"] = true;
        notes.in_script.push_back(fmt::format(
            "fp16 loss scaling as tune ran it: start at {}, halve on an overflow and skip the step, double after {} "
            "clean steps (torch's GradScaler doubles after 2000: accelerate.utils.GradScalerKwargs(init_scale={}, "
            "growth_interval={}))",
            c.loss_scale_init, c.loss_scale_window, c.loss_scale_init, c.loss_scale_window));
    }
    if (c.precision == Precision::bf16)
        notes.cannot.push_back(
            "pure bf16: bf16=True is mixed precision; load the model with torch_dtype=torch.bfloat16 "
            "for weights, gradients and states all in bf16 (no fp32 master weights: a convergence "
            "risk)");
    const FrameworkCheckpointing ckpt = framework_checkpointing(c);
    if (ckpt.whole_layers) a["gradient_checkpointing"] = true;
    if (!ckpt.note.empty()) notes.cannot.push_back(ckpt.note);
    if (c.neftune_alpha > 0) a["neftune_noise_alpha"] = c.neftune_alpha;
    if (c.optimizer == Optimizer::adam8bit && c.adam8bit_block != 256)
        notes.cannot.push_back(
            fmt::format("8-bit Adam block size {}: bitsandbytes' block size is fixed at 256", c.adam8bit_block));
    if (c.optimizer == Optimizer::lomo)
        notes.in_script.push_back("LOMO: pip install lomo-optim (transformers' optim=\"lomo\" imports it)");
    notes.in_script.push_back(fmt::format(
        "context {}: set by your tokenization or packing (e.g. max_seq_length), not by TrainingArguments", c.context));
    return a;
}

}  // namespace tune
