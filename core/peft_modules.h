// Which linear layers a LoRA target set adapts, once: the Hugging Face module
// names PEFT's `target_modules` lists, which tune's adapters are named after,
// and which the trainer, the estimator and the exports all read.
#pragma once

#include <array>
#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "core/config.h"

namespace tune {

// A Llama layer's seven linears, in layer order.
inline constexpr std::array<std::string_view, 7> kLlamaLinears{"q_proj",    "k_proj",  "v_proj",   "o_proj",
                                                               "gate_proj", "up_proj", "down_proj"};

// attention: q, k, v, o; all-linear: the MLP's too; qv: q and v only (PEFT's
// default for Llama, and LitGPT's).
inline constexpr bool lora_adapts(LoraTargets targets, std::size_t linear) {
    switch (targets) {
        case LoraTargets::attention:
            return linear < 4;
        case LoraTargets::all_linear:
            return linear < kLlamaLinears.size();
        case LoraTargets::qv:
            return linear == 0 || linear == 2;
    }
    return false;
}

inline constexpr std::size_t lora_target_count(LoraTargets targets) {
    std::size_t n = 0;
    for (std::size_t i = 0; i < kLlamaLinears.size(); ++i) n += lora_adapts(targets, i) ? 1 : 0;
    return n;
}

inline std::vector<std::string> peft_target_modules(LoraTargets targets) {
    std::vector<std::string> modules;
    for (std::size_t i = 0; i < kLlamaLinears.size(); ++i)
        if (lora_adapts(targets, i)) modules.emplace_back(kLlamaLinears[i]);
    return modules;
}

}  // namespace tune
