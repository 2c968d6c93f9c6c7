#include "exports/hf_arguments.h"

#include <fmt/format.h>

namespace tune {
namespace {

// TrainingArguments' `optim` names (transformers.training_args.OptimizerNames).
std::string optim_name(Optimizer o) {
    switch (o) {
        case Optimizer::adamw: return "adamw_torch";
        case Optimizer::lion: return "lion_32bit";
        case Optimizer::adam8bit: return "adamw_bnb_8bit";
        case Optimizer::adafactor: return "adafactor";
        case Optimizer::lomo: return "lomo";
    }
    return "adamw_torch";
}

}  // namespace

HfArguments hf_arguments(const TrialConfig& c, std::vector<std::string>& cannot) {
    HfArguments a;
    a["output_dir"] = "out";
    a["per_device_train_batch_size"] = c.micro_batch;
    a["gradient_accumulation_steps"] = c.grad_accum;
    a["optim"] = optim_name(c.optimizer);
    a["learning_rate"] = c.lr;
    a["weight_decay"] = c.weight_decay;
    a["max_grad_norm"] = c.clip;
    a["seed"] = c.seed;
    if (c.beta1) a["adam_beta1"] = *c.beta1;
    if (c.beta2) a["adam_beta2"] = *c.beta2;
    if (c.eps) a["adam_epsilon"] = *c.eps;
    if (c.precision == Precision::bf16_mixed || c.precision == Precision::bf16) a["bf16"] = true;
    if (c.precision == Precision::fp16_mixed) a["fp16"] = true;
    if (c.precision == Precision::bf16)
        cannot.push_back("pure bf16: bf16=True is mixed precision; load the model with torch_dtype=torch.bfloat16 "
                         "for weights, gradients and states all in bf16 (no fp32 master weights: a convergence risk)");
    if (c.checkpointing != Checkpointing::none) a["gradient_checkpointing"] = true;
    if (c.neftune_alpha > 0) a["neftune_noise_alpha"] = c.neftune_alpha;
    if (c.optimizer == Optimizer::adam8bit && c.adam8bit_block != 256)
        cannot.push_back(fmt::format("8-bit Adam block size {}: bitsandbytes' block size is fixed", c.adam8bit_block));
    cannot.push_back(fmt::format("context {}: set by your tokenization or packing (e.g. max_seq_length), not by "
                                 "TrainingArguments", c.context));
    return a;
}

}  // namespace tune
