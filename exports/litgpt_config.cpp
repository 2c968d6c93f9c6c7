#include "exports/litgpt_config.h"

#include <cmath>

#include <fmt/format.h>

#include "core/optimizer_hyperparameters.h"
#include "core/parallel_plan.h"
#include "exports/framework_checkpointing.h"
#include "exports/hf_arguments.h"
#include "exports/yaml_text.h"

namespace tune {
namespace {

// Lightning Fabric's precision names (litgpt finetune --precision).
const char* precision_name(Precision p) {
    switch (p) {
        case Precision::fp32:
            return "32-true";
        case Precision::bf16_mixed:
            return "bf16-mixed";
        case Precision::fp16_mixed:
            return "16-mixed";
        case Precision::bf16:
            return "bf16-true";
    }
    return "32-true";
}

// LitGPT's switches per projection: lora_mlp covers the MLP's three linears.
void lora_keys(const TrialConfig& c, YamlText& y, FrameworkExport& e) {
    const double alpha = c.lora_alpha.value_or(2.0 * c.lora_rank);
    y.key("lora_r", c.lora_rank);
    // LitGPT reads lora_alpha as an integer.
    if (alpha == std::floor(alpha))
        y.key("lora_alpha", static_cast<std::int64_t>(alpha));
    else {
        y.key("lora_alpha", static_cast<std::int64_t>(std::lround(alpha)));
        e.cannot_express.push_back(fmt::format("lora_alpha {}: LitGPT takes an integer", alpha));
    }
    y.key("lora_dropout", 0.0);
    y.key("lora_query", true);
    y.key("lora_key", c.lora_targets != LoraTargets::qv);
    y.key("lora_value", true);
    y.key("lora_projection", c.lora_targets != LoraTargets::qv);
    y.key("lora_mlp", c.lora_targets == LoraTargets::all_linear);
    y.key("lora_head", false);
}

// jsonargparse's class_path and init_args; under QLoRA LitGPT swaps AdamW for
// bitsandbytes' PagedAdamW (litgpt/finetune/lora.py, instantiate_bnb_optimizer).
void optimizer_keys(const TrialConfig& c, YamlText& y, FrameworkExport& e) {
    const OptimizerHyperparameters h = optimizer_hyperparameters(c);
    y.section("optimizer");
    const bool adam = c.optimizer == Optimizer::adamw || c.optimizer == Optimizer::adam8bit;
    y.key("class_path", c.optimizer == Optimizer::adam8bit ? "bitsandbytes.optim.AdamW8bit"
                        : adam                             ? "torch.optim.AdamW"
                                                           : "torch.optim.Adafactor");
    y.section("init_args");
    y.key("lr", h.lr);
    y.key("weight_decay", h.weight_decay);
    if (adam) {
        y.key("betas", nlohmann::json::array({h.beta1, h.beta2}));
        y.key("eps", h.eps);
    } else {
        e.cannot_express.push_back("Adafactor: torch.optim.Adafactor has no relative step; tune ran transformers' (" +
                                   adafactor_construction(c) + ")");
    }
    y.end_section();
    y.end_section();
    if (c.method == Method::qlora && c.optimizer == Optimizer::adamw)
        e.memory_added.push_back(
            "QLoRA: LitGPT swaps AdamW for bitsandbytes' PagedAdamW, whose states page "
            "between device and host under pressure");
}

// On more than one device LitGPT's scripts always shard fully and checkpoint every Block
// (FSDPStrategy(auto_wrap_policy={Block}, activation_checkpointing_policy={Block})); on one,
// neither.
void strategy_notes(const TrialConfig& c, FrameworkExport& e) {
    const bool sharded = parallel_plan(c).world() > 1;
    if (sharded && c.zero_stage != 3)
        e.cannot_express.push_back(
            fmt::format("ZeRO-{} on {} devices: LitGPT's scripts shard fully (FSDP FULL_SHARD, ZeRO-3)", c.zero_stage,
                        parallel_plan(c).world()));
    const bool whole_layers = framework_checkpointing(c).whole_layers;
    if (sharded && !whole_layers)
        e.cannot_express.push_back("no checkpointing on several devices: LitGPT checkpoints every Block there");
    if (!sharded && whole_layers)
        e.cannot_express.push_back("checkpointing on one device: LitGPT's fine-tuning scripts have no switch for it");
    if (c.attention == Attention::eager)
        e.cannot_express.push_back("eager attention: LitGPT runs scaled_dot_product_attention (flash)");
}

}  // namespace

FrameworkExport litgpt_export(const TrialConfig& c) {
    FrameworkExport e;
    YamlText y;
    const char* command = c.method == Method::full ? "finetune_full" : "finetune_lora";
    y.comment(
        fmt::format("litgpt {} CHECKPOINT_DIR --config this.yaml (CHECKPOINT_DIR from `litgpt download`)", command));
    y.key("precision", precision_name(c.precision));
    if (c.method == Method::qlora) y.key("quantize", "bnb.nf4-dq");  // NF4 with double quantization, as tune's
    y.key("devices", parallel_plan(c).world());
    y.key("num_nodes", 1);
    if (c.adapters()) lora_keys(c, y, e);
    y.key("seed", c.seed);
    y.section("train");
    y.key("global_batch_size", static_cast<std::uint64_t>(c.micro_batch) * c.grad_accum * parallel_plan(c).world());
    y.key("micro_batch_size", c.micro_batch);
    // finetune/lora.py and full.py get_lr_scheduler divide by lr_warmup_steps (0 raises
    // ZeroDivisionError), then anneal by a cosine to 0 over the run; validate_args refuses
    // max_norm, and neither script clips.
    y.key("lr_warmup_steps", 1);
    y.key("max_seq_length", c.context);
    y.end_section();
    e.cannot_express_any.push_back(
        "a constant learning rate: LitGPT's fine-tuning scripts warm up for at least one step (lr_warmup_steps 1: "
        "the first step's rate is 0) and then anneal by a cosine to 0 over the run (get_lr_scheduler); tune held "
        "it constant");
    if (c.clip > 0)
        e.cannot_express.push_back(fmt::format(
            "gradient clipping at {}: LitGPT's fine-tuning scripts do not clip and refuse train.max_norm", c.clip));
    optimizer_keys(c, y, e);
    strategy_notes(c, e);
    e.in_script.push_back("the data: `data:` (class_path litgpt.data.*) names yours; LitGPT's default is Alpaca");
    e.body = y.text();
    return e;
}

}  // namespace tune
