// What a configuration asks of the model-loading code rather than of the
// framework's config file: the attention implementation, LoRA adapters (PEFT)
// and the 4-bit base of QLoRA (bitsandbytes). No DeepSpeed JSON, FSDP config
// or TrainingArguments holds these, so every export says how to set them in
// the training script, and the memory those libraries add over tune's engine.
#pragma once

#include <string>
#include <vector>

#include "core/config.h"

namespace tune {

struct ModelSetup {
    std::vector<std::string> in_script;     // what the training script must do, with the exact arguments
    std::vector<std::string> memory_added;  // what those libraries hold beyond tune's engine
};

// `sharded`: the framework shards parameters (ZeRO-3, FSDP FULL_SHARD).
ModelSetup model_setup(const TrialConfig& c, bool sharded);

}  // namespace tune
