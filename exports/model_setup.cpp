#include "exports/model_setup.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "core/peft_modules.h"

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
        case Precision::fp32: return "torch.float32";
        case Precision::fp16_mixed: return "torch.float16";
        default: return "torch.bfloat16";
    }
}

std::string lora_setup(const TrialConfig& c) {
    return fmt::format("{}: model = peft.get_peft_model(model, peft.LoraConfig(r={}, lora_alpha={}, lora_dropout=0.0, "
                       "bias=\"none\", target_modules=[\"{}\"], task_type=\"CAUSAL_LM\")) after loading",
                       c.method == Method::qlora ? "QLoRA adapters" : "LoRA", c.lora_rank, c.lora_scale() * c.lora_rank,
                       fmt::join(peft_target_modules(c.lora_targets), "\", \""));
}

std::string qlora_base_setup(const TrialConfig& c, bool sharded) {
    std::string storage = sharded ? fmt::format(", bnb_4bit_quant_storage={}", compute_dtype(c.precision)) : "";
    return fmt::format("QLoRA base: from_pretrained(..., quantization_config=transformers.BitsAndBytesConfig("
                       "load_in_4bit=True, bnb_4bit_quant_type=\"nf4\", bnb_4bit_use_double_quant=True, "
                       "bnb_4bit_compute_dtype={}{})), then peft.prepare_model_for_kbit_training(model, "
                       "use_gradient_checkpointing={}){}",
                       compute_dtype(c.precision), storage, c.checkpointing != Checkpointing::none ? "True" : "False",
                       sharded ? " (the quant storage dtype lets ZeRO-3/FSDP shard the 4-bit weights with the rest)"
                               : "");
}

}  // namespace

ModelSetup model_setup(const TrialConfig& c, bool sharded) {
    ModelSetup s;
    s.in_script.push_back(attention_setup(c.attention));
    if (c.method == Method::full) return s;
    if (c.method == Method::qlora) {
        s.in_script.push_back(qlora_base_setup(c, sharded));
        s.memory_added.push_back("prepare_model_for_kbit_training casts the base's unquantized parameters "
                                 "(embedding, norms, LM head) to fp32: +2 bytes each over tune's 16-bit copies");
    }
    s.in_script.push_back(lora_setup(c));
    return s;
}

}  // namespace tune
