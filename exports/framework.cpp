#include "exports/framework.h"

#include <cmath>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/convergence_risk.h"
#include "core/units.h"
#include "search/estimate.h"
#include "exports/hf_arguments.h"
#include "exports/model_setup.h"

namespace tune {
namespace {

using json = nlohmann::json;

std::uint64_t fp32_grad_partition_bytes(const TrialConfig& c) {
    EstimateOptions o;
    apply_framework_profile(Framework::deepspeed, o);
    return framework_gradient_bytes(c.model, c, o);
}

json deepspeed_optimizer(const TrialConfig& c, std::vector<std::string>& cannot) {
    json params{{"lr", c.lr}, {"weight_decay", c.weight_decay}};
    if (c.beta1 || c.beta2) params["betas"] = {c.beta1.value_or(0.9), c.beta2.value_or(c.optimizer == Optimizer::lion ? 0.99 : 0.999)};
    switch (c.optimizer) {
        case Optimizer::adamw:
            if (c.eps) params["eps"] = *c.eps;
            return {{"type", "AdamW"}, {"params", params}};
        case Optimizer::lion: return {{"type", "Lion"}, {"params", params}};
        case Optimizer::adam8bit:
            cannot.push_back("8-bit Adam: DeepSpeed has no such optimizer; build bitsandbytes' AdamW8bit in your "
                             "script and pass it to deepspeed.initialize (no \"optimizer\" block is written)");
            return nullptr;
        case Optimizer::adafactor:
            cannot.push_back("Adafactor: DeepSpeed has no such optimizer; pass transformers' Adafactor to "
                             "deepspeed.initialize (no \"optimizer\" block is written)");
            return nullptr;
        case Optimizer::lomo:
            cannot.push_back("LOMO: DeepSpeed always keeps whole gradients for its optimizer step; LOMO's fused "
                             "update in backward cannot be expressed (use the LOMO library or HF's optim=\"lomo\")");
            return nullptr;
    }
    return nullptr;
}

FrameworkExport deepspeed(const TrialConfig& c) {
    FrameworkExport e;
    e.json = true;
    json ds{{"train_micro_batch_size_per_gpu", c.micro_batch},
            {"gradient_accumulation_steps", c.grad_accum},
            {"train_batch_size", std::uint64_t{c.micro_batch} * c.grad_accum * c.world_size},
            {"zero_optimization", {{"stage", c.zero_stage}}},
            {"steps_per_print", 10}};
    if (c.clip > 0) ds["gradient_clipping"] = c.clip;
    if (c.precision == Precision::bf16_mixed || c.precision == Precision::bf16) ds["bf16"] = {{"enabled", true}};
    if (c.precision == Precision::fp16_mixed)
        ds["fp16"] = {{"enabled", true},
                      {"loss_scale", 0},
                      {"initial_scale_power", static_cast<int>(std::lround(std::log2(c.loss_scale_init)))},
                      {"loss_scale_window", c.loss_scale_window}};
    if (c.precision == Precision::bf16)
        e.cannot_express.push_back("pure bf16 (no fp32 master weights): DeepSpeed's bf16 keeps an fp32 master copy "
                                   "(+4 bytes per parameter, sharded from ZeRO-1) and fp32 optimizer states");
    if (json opt = deepspeed_optimizer(c, e.cannot_express); !opt.is_null()) ds["optimizer"] = opt;
    if (c.checkpointing != Checkpointing::none) {
        ds["activation_checkpointing"] = {{"partition_activations", false}, {"contiguous_memory_optimization", false},
                                          {"cpu_checkpointing", false}};
        e.cannot_express.push_back("activation checkpointing is switched on in the model (model.gradient_checkpointing_enable() "
                                   "or deepspeed.checkpointing.checkpoint per layer); the block above only configures it");
    }
    if (c.checkpointing == Checkpointing::selective)
        e.cannot_express.push_back("selective checkpointing (keep all but attention scores): DeepSpeed checkpoints whole "
                                   "layers; use a fused attention kernel (flash-attn) for the same effect");
    if (c.neftune_alpha > 0) e.cannot_express.push_back("NEFTune: not a DeepSpeed setting (HF Trainer: neftune_noise_alpha)");
    if (const auto extra = fp32_grad_partition_bytes(c))
        e.memory_added.push_back(fmt::format("ZeRO-{} keeps fp32 gradient partitions: 4 bytes x {} parameters / {} ranks "
                                             "= {} per rank (tune estimate --framework deepspeed adds it)",
                                             c.zero_stage, c.model.param_count(), c.world_size, format_bytes(extra)));
    e.memory_added.push_back("communication buckets: reduce_bucket_size and allgather_bucket_size (default 5e8 elements "
                             "each) in the gradients' dtype");
    e.body = ds.dump(2);
    return e;
}

std::string fsdp_strategy(const TrialConfig& c, std::vector<std::string>& cannot) {
    switch (c.zero_stage) {
        case 0: return "NO_SHARD";
        case 1:
            cannot.push_back("ZeRO-1 (only optimizer states sharded): FSDP has no such strategy; SHARD_GRAD_OP also shards gradients");
            return "SHARD_GRAD_OP";
        case 2: return "SHARD_GRAD_OP";
        default: return "FULL_SHARD";
    }
}

std::string mixed_precision(const TrialConfig& c) {
    switch (c.precision) {
        case Precision::fp32: return "no";
        case Precision::fp16_mixed: return "fp16";
        default: return "bf16";
    }
}

std::string decoder_layer_class(const ModelSpec& m) {
    if (m.qkv_bias && !m.o_bias) return "Qwen2DecoderLayer";
    if (m.sliding_window != 0 || m.head_dim_setting != 0) return "MistralDecoderLayer";
    return "LlamaDecoderLayer";
}

FrameworkExport accelerate_fsdp(const TrialConfig& c) {
    FrameworkExport e;
    const std::string strategy = fsdp_strategy(c, e.cannot_express);
    std::string y;
    y += "compute_environment: LOCAL_MACHINE\n";
    y += "distributed_type: FSDP\n";
    y += fmt::format("mixed_precision: {}\n", mixed_precision(c));
    y += "num_machines: 1\n";
    y += fmt::format("num_processes: {}\n", c.world_size);
    y += "machine_rank: 0\n";
    y += "main_training_function: main\n";
    y += "use_cpu: false\n";
    y += "fsdp_config:\n";
    y += fmt::format("  fsdp_sharding_strategy: {}\n", strategy);
    y += "  fsdp_auto_wrap_policy: TRANSFORMER_BASED_WRAP\n";
    y += fmt::format("  fsdp_transformer_layer_cls_to_wrap: {}\n", decoder_layer_class(c.model));
    y += "  fsdp_backward_prefetch: BACKWARD_PRE\n";
    y += "  fsdp_state_dict_type: SHARDED_STATE_DICT\n";
    y += "  fsdp_use_orig_params: true\n";
    y += "  fsdp_sync_module_states: true\n";
    y += "  fsdp_offload_params: false\n";
    y += fmt::format("  fsdp_activation_checkpointing: {}\n", c.checkpointing != Checkpointing::none ? "true" : "false");
    HfArguments args = hf_arguments(c, e.cannot_express);
    args.erase("gradient_checkpointing");  // FSDP's own setting above does it
    y += "# TrainingArguments for this config (tune ... --emit hf-trainer writes them as JSON):\n";
    for (const auto& [key, value] : args) y += fmt::format("#   {}: {}\n", key, value.dump());
    e.body = y;
    if (c.checkpointing == Checkpointing::selective)
        e.cannot_express.push_back("selective checkpointing: FSDP checkpoints whole layers; a fused attention kernel "
                                   "(attn_implementation=\"flash_attention_2\") keeps no attention scores instead");
    if (c.precision != Precision::fp32)
        e.memory_added.push_back("FSDP keeps gradients in the sharded parameters' dtype (fp32 under mixed precision): "
                                 "+2 bytes per parameter over tune's 16-bit gradients, divided by N when sharded");
    e.memory_added.push_back("FSDP prefetches the next layer's gathered parameters (BACKWARD_PRE): one more gathered layer");
    return e;
}

// What PyTorch's own mixed precision and DDP hold beyond tune's engine.
std::vector<std::string> trainer_memory_notes() {
    return {"PyTorch autocast keeps fp32 weights and fp32 gradients (8 bytes per parameter) where tune holds 16-bit "
            "weights and gradients beside an fp32 master copy (8 bytes per parameter too)",
            "DDP's gradient buckets hold a second copy of the gradients unless gradient_as_bucket_view is set"};
}

// TrainingArguments, with ZeRO through DeepSpeed (the Trainer's own route to it).
HfArguments trainer_arguments(const TrialConfig& c, std::vector<std::string>& cannot) {
    HfArguments args = hf_arguments(c, cannot);
    if (c.zero_stage > 0) {
        args["deepspeed"] = "ds_config.json";
        cannot.push_back(fmt::format("ZeRO-{}: the Trainer does it through DeepSpeed: write ds_config.json with "
                                     "`--emit deepspeed`", c.zero_stage));
    }
    return args;
}

FrameworkExport hf_trainer(const TrialConfig& c) {
    FrameworkExport e;
    e.json = true;
    json j = json::object();
    for (const auto& [k, v] : trainer_arguments(c, e.cannot_express)) j[k] = v;
    e.body = j.dump(2);
    e.memory_added = trainer_memory_notes();
    return e;
}

std::string shell_quote(const std::string& s) {
    if (s.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-.=/:,") == std::string::npos) return s;
    std::string out = "'";
    for (char ch : s) out += ch == '\'' ? std::string("'\\''") : std::string(1, ch);
    return out + "'";
}

FrameworkExport torchrun(const TrialConfig& c) {
    FrameworkExport e;
    std::string cmd = fmt::format("torchrun --nnodes 1 --nproc_per_node {} train.py", c.world_size);
    for (const auto& [key, value] : trainer_arguments(c, e.cannot_express)) {
        if (value.is_boolean()) {
            if (value.get<bool>()) cmd += " --" + key;
            continue;
        }
        cmd += " --" + key + " " + shell_quote(value.is_string() ? value.get<std::string>() : value.dump());
    }
    e.body = cmd + "\n";
    e.cannot_express.push_back("train.py stands for your Hugging Face training script (HfArgumentParser over "
                               "TrainingArguments)");
    e.memory_added = trainer_memory_notes();
    return e;
}

std::string comment_lines(const FrameworkExport& e) {
    std::string out;
    for (const auto& s : e.cannot_express) out += "# cannot express: " + s + "\n";
    for (const auto& s : e.in_script) out += "# in your script: " + s + "\n";
    for (const auto& s : e.memory_added) out += "# memory added: " + s + "\n";
    for (const auto& s : e.risks) out += fmt::format("# {}: {}\n", kConvergenceRiskLabel, s);
    return out;
}

FrameworkExport export_for(Framework f, const TrialConfig& c) {
    switch (f) {
        case Framework::deepspeed: return deepspeed(c);
        case Framework::accelerate_fsdp: return accelerate_fsdp(c);
        case Framework::torchrun: return torchrun(c);
        case Framework::hf_trainer: return hf_trainer(c);
    }
    return deepspeed(c);
}

}  // namespace

std::optional<Framework> parse_framework(std::string_view text) {
    for (std::size_t i = 0; i < kFrameworkNames.size(); ++i)
        if (kFrameworkNames[i] == text) return static_cast<Framework>(i);
    return std::nullopt;
}

FrameworkExport export_config(Framework f, const TrialConfig& c) {
    FrameworkExport e = export_for(f, c);
    ModelSetup setup = model_setup(c, c.zero_stage == 3);
    e.in_script = std::move(setup.in_script);
    e.memory_added.insert(e.memory_added.end(), setup.memory_added.begin(), setup.memory_added.end());
    if (const auto risk = convergence_risk(c)) e.risks.emplace_back(*risk);
    return e;
}

RenderedExport render(const FrameworkExport& e, Framework f) {
    const std::string header = fmt::format("# tune --emit {}\n", to_string(f)) + comment_lines(e);
    if (e.json) return {e.body + "\n", header};
    return {header + e.body, {}};
}

void apply_framework_profile(Framework f, EstimateOptions& o) {
    o.fp32_grad_partition_bytes = f == Framework::deepspeed ? 4 : 0;
}

}  // namespace tune
