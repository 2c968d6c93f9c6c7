// What a configuration asks of the model-loading code rather than of the
// framework's config file: the attention implementation, LoRA adapters (PEFT)
// and the 4-bit base of QLoRA (bitsandbytes). No DeepSpeed JSON, FSDP config
// or TrainingArguments holds these, so every export says how to set them in
// the training script, and the memory those libraries add over tune's engine.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/config.h"

namespace tune {

struct ModelSetup {
    std::vector<std::string> in_script;     // what the training script must do, with the exact arguments
    std::vector<std::string> memory_added;  // what those libraries hold beyond tune's engine
};

// How the framework holds parameters: whole (DDP, ZeRO 0-2), sharded by
// ZeRO-3, or flattened into FSDP's units under every FSDP strategy. The last
// two need QLoRA's 4-bit weights stored in the dtype of the rest.
enum class FrameworkSharding : std::uint8_t { none, zero3, fsdp };

// `fp32_model`: the stack keeps the weights in fp32 under mixed precision when the
// model loads in fp32 (estimate/frameworks holds_fp32_model), so the script must load it so.
ModelSetup model_setup(const TrialConfig& c, FrameworkSharding sharding, bool fp32_model);

}  // namespace tune
