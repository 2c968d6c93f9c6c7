// Hugging Face module names of the linear layers a LoRA target set adapts:
// what PEFT's `target_modules` lists, and what tune's adapters are named after.
#pragma once

#include <string>
#include <vector>

#include "core/config.h"

namespace tune {

inline std::vector<std::string> peft_target_modules(LoraTargets targets) {
    std::vector<std::string> modules{"q_proj", "k_proj", "v_proj", "o_proj"};
    if (targets == LoraTargets::all_linear) modules.insert(modules.end(), {"gate_proj", "up_proj", "down_proj"});
    return modules;
}

}  // namespace tune
