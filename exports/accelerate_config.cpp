#include "exports/accelerate_config.h"

#include <fmt/format.h>

#include "core/parallel_plan.h"
#include "exports/framework_checkpointing.h"
#include "exports/hf_arguments.h"
#include "exports/yaml_text.h"

namespace tune {
namespace {

// accelerate's `mixed_precision` ("no", "fp16", "bf16"; a string, quoted by YamlText).
std::string mixed_precision(const TrialConfig& c) {
    switch (c.precision) {
        case Precision::fp32:
            return "no";
        case Precision::fp16_mixed:
            return "fp16";
        default:
            return "bf16";
    }
}

std::string decoder_layer_class(const ModelSpec& m) {
    if (m.qk_norm) return "Qwen3DecoderLayer";
    if (m.qkv_bias && !m.o_bias) return "Qwen2DecoderLayer";
    if (m.sliding_window != 0 || m.head_dim_setting != 0) return "MistralDecoderLayer";
    return "LlamaDecoderLayer";
}

// FSDP1's ShardingStrategy for ZeRO 2-3 (ZeRO-1 is refused: estimate/frameworks/framework_validity;
// ZeRO-0 runs under DDP: accelerate_export).
std::string fsdp1_strategy(const TrialConfig& c) { return c.zero_stage == 2 ? "SHARD_GRAD_OP" : "FULL_SHARD"; }

void fsdp1_section(const TrialConfig& c, YamlText& y, FrameworkExport& e) {
    y.key("fsdp_version", 1);
    y.key("fsdp_sharding_strategy", fsdp1_strategy(c));
    y.key("fsdp_backward_prefetch", "BACKWARD_PRE");
    // PEFT's FSDP guide (docs/source/accelerate/fsdp.md): use_orig_params must be false for LoRA's memory savings.
    y.key("fsdp_use_orig_params", !c.adapters());
    y.key("fsdp_sync_module_states", true);
    e.memory_added.push_back(
        "FSDP prefetches the next layer's gathered parameters (BACKWARD_PRE): one more gathered layer");
}

// FSDP2 (fully_shard): reshard_after_forward true is ZeRO-3, false keeps the
// gathered parameters from forward to backward as ZeRO-2 does.
void fsdp2_section(const TrialConfig& c, YamlText& y) {
    y.key("fsdp_version", 2);
    y.key("fsdp_reshard_after_forward", c.zero_stage >= 3);
}

void fsdp_config(const TrialConfig& c, int fsdp_version, YamlText& y, FrameworkExport& e) {
    y.section("fsdp_config");
    if (fsdp_version == 1)
        fsdp1_section(c, y, e);
    else
        fsdp2_section(c, y);
    y.key("fsdp_auto_wrap_policy", "TRANSFORMER_BASED_WRAP");
    y.key("fsdp_transformer_layer_cls_to_wrap", decoder_layer_class(c.model));
    y.key("fsdp_state_dict_type", "SHARDED_STATE_DICT");
    y.key("fsdp_cpu_ram_efficient_loading", true);
    // FSDP's CPUOffload(offload_params=True): parameters, gradients and optimizer states on the host
    // (estimate/frameworks/framework_validity refuses optimizer-only offload under FSDP).
    y.key("fsdp_offload_params", c.offload == Offload::optimizer_params);
    const FrameworkCheckpointing ckpt = framework_checkpointing(c);
    y.key("fsdp_activation_checkpointing", ckpt.whole_layers);
    y.end_section();
    // estimate/frameworks/fsdp.cpp shard_grad_op_terms: at FULL_SHARD the fp32 shards even out.
    if (c.zero_stage == 2 && !c.adapters())
        e.memory_added.push_back(
            "SHARD_GRAD_OP keeps each shard and its gradient in the dtype the model loads in (fp32 under mixed "
            "precision) beside the gathered weights: +2 bytes per parameter / N over tune's 16-bit gradients "
            "through backward (tune estimate --framework accelerate-fsdp counts it)");
}

}  // namespace

FrameworkExport accelerate_export(const TrialConfig& c, int fsdp_version) {
    FrameworkExport e;
    // ZeRO-0 is data parallelism, which DDP runs: FSDP2 has no NO_SHARD, and
    // FSDP1's is the same replication through FlatParameters, which the profile
    // (estimate/frameworks/model_dtype.cpp stack_rules) does not model.
    const bool ddp = c.zero_stage == 0;
    YamlText y;
    y.key("compute_environment", "LOCAL_MACHINE");
    y.key("distributed_type", ddp ? "MULTI_GPU" : "FSDP");
    y.key("mixed_precision", mixed_precision(c));
    y.key("num_machines", 1);
    y.key("num_processes", parallel_plan(c).world());
    y.key("machine_rank", 0);
    y.key("main_training_function", "main");
    y.key("use_cpu", false);
    if (!ddp) fsdp_config(c, fsdp_version, y, e);
    HfNotes notes;
    HfArguments args = hf_arguments(c, notes);
    if (!ddp) args.erase("gradient_checkpointing");  // fsdp_activation_checkpointing above does it
    y.comment("TrainingArguments for this config (tune ... --emit hf-trainer writes them as JSON):");
    for (const auto& [key, value] : args) y.comment(fmt::format("  {}: {}", key, value.dump()));
    e.body = y.text();
    add_notes(e, notes);
    // FSDP1 without use_orig_params hands the optimizer FlatParameters, a type
    // foreach does not take (optimizer.py _default_to_fused_or_foreach): it loops.
    if (fsdp_version == 2 || !c.adapters()) note_foreach_adamw(FrameworkProfile::accelerate_fsdp, c, e);
    return e;
}

}  // namespace tune
