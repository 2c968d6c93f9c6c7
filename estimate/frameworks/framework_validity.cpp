// Which configurations each stack can run at all: the one rule set beyond
// core/validity (which our engine follows). A sweep marks a configuration
// invalid for its framework with this reason; the exports refuse with it.
#include <fmt/format.h>

#include "estimate/frameworks/framework_profile.h"

namespace tune {
namespace {

bool transformers_stack(FrameworkProfile f) {
    return f == FrameworkProfile::hf_trainer || f == FrameworkProfile::torchrun || f == FrameworkProfile::deepspeed ||
           f == FrameworkProfile::accelerate_fsdp;
}

// transformers' Trainer.training_step passes learning_rate= to accelerate's
// Accelerator.backward, which hands it to the DeepSpeed engine (at every ZeRO
// stage, 0 included: DeepSpeedEngineWrapper.backward forwards it to
// DeepSpeedEngine.backward) or to the GradScaler's scaled loss.backward(): both
// raise TypeError. The stacks that run DeepSpeed's engine are stack_rules'.
std::optional<std::string> transformers_lomo_problem(FrameworkProfile f, const TrialConfig& c) {
    if (c.optimizer != Optimizer::lomo) return std::nullopt;
    if (stack_rules(f, c) == FrameworkProfile::deepspeed)
        return fmt::format(
            "LOMO under DeepSpeed (ZeRO-{}): HF Trainer's optim=\"lomo\" cannot run on DeepSpeed's engine "
            "(Trainer.training_step passes learning_rate to accelerate's DeepSpeedEngineWrapper.backward: "
            "TypeError); choose hf-trainer or torchrun at ZeRO-0, or train it with the LOMO library's own trainer",
            c.zero_stage);
    if (c.precision == Precision::fp16_mixed)
        return std::string(
            "LOMO with fp16-mixed: HF Trainer's optim=\"lomo\" passes learning_rate to the GradScaler's scaled "
            "loss.backward() (TypeError); choose a bf16-mixed, bf16 or fp32 configuration");
    return std::nullopt;
}

// FSDP's sharding strategies (torch.distributed.fsdp.ShardingStrategy, and
// FSDP2's reshard_after_forward) shard gradients with the optimizer states or
// nothing: no mode shards the optimizer states alone.
std::optional<std::string> fsdp_problem(FrameworkProfile f, const TrialConfig& c) {
    if (c.zero_stage != 1) return std::nullopt;
    return fmt::format(
        "ZeRO-1 under {}: FSDP has no mode that shards only the optimizer states (SHARD_GRAD_OP also "
        "shards the gradients); choose ZeRO-0, 2 or 3",
        to_string(f));
}

// torchtitan/components/optimizer.py build_optimizers: Adam and AdamW (its
// Dion and Muon are experiments); torchtitan trains every parameter and keeps
// FSDP2's sharded parameters in fp32 (training.mixed_precision_param is the
// compute dtype, bfloat16 or float32), with no loss scaling.
std::optional<std::string> torchtitan_problem(const TrialConfig& c) {
    if (c.optimizer != Optimizer::adamw)
        return fmt::format("{} under torchtitan: its build_optimizers makes Adam and AdamW only; choose adamw",
                           to_string(c.optimizer));
    if (c.adapters())
        return fmt::format("{} under torchtitan: it has no adapters and trains every parameter; choose full",
                           to_string(c.method));
    if (c.precision == Precision::bf16)
        return std::string(
            "pure bf16 under torchtitan: FSDP2 keeps its sharded parameters in fp32 and casts them "
            "for compute; choose bf16-mixed");
    if (c.precision == Precision::fp16_mixed)
        return std::string("fp16-mixed under torchtitan: it has no loss scaling; choose bf16-mixed");
    return fsdp_problem(FrameworkProfile::torchtitan, c);
}

// LitGPT's fine-tuning scripts build the optimizer from a torch.optim class
// name (litgpt/utils.py instantiate_torch_optimizer), or bitsandbytes' for
// QLoRA: no Lion in torch.optim, and no LOMO.
std::optional<std::string> litgpt_problem(const TrialConfig& c) {
    if (c.optimizer == Optimizer::lion || c.optimizer == Optimizer::lomo)
        return fmt::format(
            "{} under LitGPT: its scripts build torch.optim optimizers (and bitsandbytes' for "
            "QLoRA); choose adamw, adam8bit or adafactor",
            to_string(c.optimizer));
    // litgpt/finetune/lora.py setup: bitsandbytes quantization on one device only, and never
    // with a mixed-precision plugin.
    if (c.method == Method::qlora && parallel_plan(c).world() > 1)
        return fmt::format(
            "QLoRA on {} devices: LitGPT quantizes on one device only (\"Quantization is currently "
            "not supported for multi-GPU training\"); choose one GPU or LoRA",
            parallel_plan(c).world());
    if (c.method == Method::qlora && (c.precision == Precision::bf16_mixed || c.precision == Precision::fp16_mixed))
        return fmt::format(
            "QLoRA with {}: LitGPT refuses quantization with mixed precision; choose bf16 "
            "(bf16-true) or fp32",
            to_string(c.precision));
    return fsdp_problem(FrameworkProfile::litgpt, c);
}

// Matmul outputs saved op by op is torchtitan's selective_ac_option = "op"
// (_apply_ac_to_transformer_block); transformers' gradient_checkpointing_enable
// (modeling_utils.py), DeepSpeed's and FSDP's wrappers and LitGPT's
// activation_checkpointing_policy checkpoint whole decoder layers.
std::optional<std::string> checkpointing_problem(FrameworkProfile f, const TrialConfig& c) {
    if (c.checkpointing != Checkpointing::selective_op || f == FrameworkProfile::tune ||
        f == FrameworkProfile::torchtitan)
        return std::nullopt;
    return fmt::format(
        "selective-op checkpointing under {}: only torchtitan saves matmul outputs op by op, {} checkpoints "
        "whole decoder layers; choose full (or none)",
        to_string(f), to_string(f));
}

// Offload (core/offload_plan.h) where each stack has it: DeepSpeed's offload_optimizer and
// offload_param (runtime/zero/offload_config.py), which HF Trainer and torchrun reach through
// its config; FSDP's CPUOffload(offload_params=True) (torch.distributed.fsdp, accelerate's
// fsdp_offload_params, torchtitan's FSDP2 CPUOffloadPolicy), which moves the parameters with
// their gradients and optimizer states, never the optimizer alone. LitGPT's scripts build
// FSDPStrategy without cpu_offload.
std::optional<std::string> offload_problem(FrameworkProfile f, const TrialConfig& c) {
    if (c.offload == Offload::none) return std::nullopt;
    const bool fsdp = f == FrameworkProfile::accelerate_fsdp || f == FrameworkProfile::torchtitan;
    if (fsdp && c.offload == Offload::optimizer)
        return fmt::format(
            "offload optimizer under {}: FSDP's CPU offload moves parameters, gradients and optimizer states "
            "together (CPUOffload(offload_params=True)), never the optimizer alone; choose optimizer+params",
            to_string(f));
    if (f == FrameworkProfile::litgpt)
        return std::string(
            "offload under LitGPT: its fine-tuning scripts build FSDPStrategy without cpu_offload; choose offload "
            "none, or DeepSpeed");
    return std::nullopt;
}

// Tensor parallelism (core/parallel_plan.h) for training: torchtitan's
// parallelism.tensor_parallel_degree (with enable_sequence_parallel, on by
// default: torchtitan/config/configs.py ParallelismConfig), and Megatron-LM,
// which tune exports to without a profile of its own. HF Trainer and DeepSpeed
// (outside Megatron-DeepSpeed) have none; accelerate's ParallelismConfig(tp_size)
// runs transformers' tp_plan, which this profile's FSDP model does not cover;
// LitGPT's scripts build FSDPStrategy alone.
std::optional<std::string> tensor_parallel_problem(FrameworkProfile f, const TrialConfig& c) {
    if (c.tensor_parallel <= 1 || f == FrameworkProfile::tune || f == FrameworkProfile::torchtitan) return std::nullopt;
    if (f == FrameworkProfile::accelerate_fsdp)
        return fmt::format(
            "tensor_parallel {} under accelerate-fsdp: accelerate's ParallelismConfig(tp_size) runs transformers' "
            "tp_plan, which this profile does not model; choose tensor_parallel 1, or torchtitan",
            c.tensor_parallel);
    return fmt::format(
        "tensor_parallel {} under {}: it has no tensor parallelism for training (DeepSpeed only inside "
        "Megatron-DeepSpeed); choose tensor_parallel 1, or train with torchtitan or Megatron-LM (--emit megatron)",
        c.tensor_parallel, to_string(f));
}

// Pipeline parallelism: torchtitan's parallelism.pipeline_parallel_degree (torchtitan/distributed/
// pipeline_parallel.py pipeline_llm, its schedules 1F1B and Interleaved1F1B), and Megatron-LM, which tune
// exports to. transformers' Trainer, accelerate and LitGPT have none; DeepSpeed's pipeline engine needs the
// model rewritten as a PipelineModule of layers, which no Hugging Face model is.
std::optional<std::string> pipeline_parallel_problem(FrameworkProfile f, const TrialConfig& c) {
    if (c.pipeline_parallel <= 1 || f == FrameworkProfile::tune || f == FrameworkProfile::torchtitan)
        return std::nullopt;
    return fmt::format(
        "pipeline_parallel {} under {}: it has no pipeline parallelism for a Hugging Face model (DeepSpeed's "
        "needs the model rewritten as a PipelineModule); choose pipeline_parallel 1, or train with torchtitan or "
        "Megatron-LM (--emit megatron)",
        c.pipeline_parallel, to_string(f));
}

}  // namespace

std::optional<std::string> framework_problem(FrameworkProfile f, const TrialConfig& c) {
    if (auto p = tensor_parallel_problem(f, c)) return p;
    if (auto p = pipeline_parallel_problem(f, c)) return p;
    if (auto p = checkpointing_problem(f, c)) return p;
    if (auto p = offload_problem(f, c)) return p;
    if (transformers_stack(f))
        if (auto p = transformers_lomo_problem(f, c)) return p;
    if (f == FrameworkProfile::accelerate_fsdp) return fsdp_problem(f, c);
    if (f == FrameworkProfile::torchtitan) return torchtitan_problem(c);
    if (f == FrameworkProfile::litgpt) return litgpt_problem(c);
    return std::nullopt;
}

}  // namespace tune
