#include "exports/model_setup.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "core/peft_modules.h"
#include "core/units.h"
#include "estimate/frameworks/framework_profile.h"
#include "exports/framework_checkpointing.h"

namespace tune {
namespace {

// transformers' `attn_implementation` for from_pretrained.
std::string attention_setup(Attention a) {
    if (a == Attention::flash)
        return "attention flash: load the model with attn_implementation=\"flash_attention_2\" (or \"sdpa\", which "
               "also keeps no attention probabilities)";
    return "attention eager: load the model with attn_implementation=\"eager\" (keeps the (b, a, s, s) "
           "probabilities for backward)";
}

std::string compute_dtype(Precision p) {
    switch (p) {
        case Precision::fp32:
            return "torch.float32";
        case Precision::fp16_mixed:
            return "torch.float16";
        default:
            return "torch.bfloat16";
    }
}

std::string lora_setup(const TrialConfig& c) {
    return fmt::format(
        "{}: model = peft.get_peft_model(model, peft.LoraConfig(r={}, lora_alpha={}, lora_dropout=0.0, "
        "bias=\"none\", target_modules=[\"{}\"], task_type=\"CAUSAL_LM\")) after loading",
        c.method == Method::qlora ? "QLoRA adapters" : "LoRA", c.lora_rank, c.lora_scale() * c.lora_rank,
        fmt::join(peft_target_modules(c.lora_targets), "\", \""));
}

// The dtype the model loads in (torch_dtype), which the 4-bit storage must
// match for FSDP and ZeRO-3 to shard both together: PEFT's
// docs/source/accelerate/fsdp.md (QLoRA section) stores bfloat16 for pure
// bf16 training and float32 under AMP, whose GradScaler (fp16) and autocast
// (bf16) keep fp32 parameters.
std::string quant_storage(Precision p) { return p == Precision::bf16 ? "torch.bfloat16" : "torch.float32"; }

std::string qlora_base_setup(const TrialConfig& c, FrameworkSharding sharding) {
    const bool sharded = sharding != FrameworkSharding::none;
    const std::string storage = sharded ? fmt::format(", bnb_4bit_quant_storage={}", quant_storage(c.precision)) : "";
    std::string s = fmt::format(
        "QLoRA base: from_pretrained(..., quantization_config=transformers.BitsAndBytesConfig(load_in_4bit=True, "
        "bnb_4bit_quant_type=\"nf4\", bnb_4bit_use_double_quant=True, bnb_4bit_compute_dtype={}{}))",
        compute_dtype(c.precision), storage);
    if (sharded)
        return s + fmt::format(
                       ", with torch_dtype={} for the rest (the storage dtype lets {} hold the 4-bit weights with "
                       "them); do not call peft.prepare_model_for_kbit_training: it upcasts the norms to fp32 and "
                       "breaks the uniform dtype sharding needs (trl/experimental/utils.py prepare_peft_model skips "
                       "it for sharded QLoRA)",
                       quant_storage(c.precision), sharding == FrameworkSharding::fsdp ? "FSDP" : "ZeRO-3");
    return s + fmt::format(", then peft.prepare_model_for_kbit_training(model, use_gradient_checkpointing={})",
                           framework_checkpointing(c).whole_layers ? "True" : "False");
}

}  // namespace

ModelSetup model_setup(const TrialConfig& c, FrameworkSharding sharding, bool fp32_model) {
    ModelSetup s;
    s.in_script.push_back(attention_setup(c.attention));
    // QLoRA's load dtype is the 4-bit storage's (qlora_base_setup).
    if (fp32_model && c.method != Method::qlora)
        s.in_script.push_back(
            "load the model in fp32: from_pretrained(..., torch_dtype=torch.float32), which mixed precision casts "
            "for compute (transformers 5 loads a bf16 checkpoint in bf16 unless told)");
    if (fp32_model && c.method == Method::lora)
        s.memory_added.push_back(
            "the frozen base in fp32: +2 bytes a weight over tune's 16-bit base; loading it with "
            "torch_dtype=torch.bfloat16 saves them (tune estimate --base-dtype 16-bit predicts that load)");
    if (c.method == Method::full) return s;
    if (c.method == Method::qlora) {
        s.in_script.push_back(qlora_base_setup(c, sharding));
        if (sharding == FrameworkSharding::none)
            s.memory_added.push_back(
                "prepare_model_for_kbit_training casts the base's unquantized parameters (embedding, norms, LM "
                "head) to fp32: +2 bytes each over tune's 16-bit copies");
        if (const FrameworkTerm state = c.model.sized() ? bnb_quant_state_term(c) : FrameworkTerm{}; state.bytes > 0)
            s.memory_added.push_back(fmt::format(
                "bitsandbytes keeps each Linear4bit's quantization state (absmax codes, nested scales) whole on "
                "every rank, where {} shards only the 4-bit codes: +{} per rank over tune's engine (tune estimate "
                "--framework {} adds it)",
                sharding == FrameworkSharding::fsdp ? "FSDP" : "ZeRO-3",
                format_bytes(static_cast<std::uint64_t>(state.bytes)),
                sharding == FrameworkSharding::fsdp ? "accelerate-fsdp" : "deepspeed"));
    }
    s.in_script.push_back(lora_setup(c));
    return s;
}

}  // namespace tune
