// Hugging Face TrainingArguments for a configuration, shared by the
// hf-trainer, torchrun and accelerate exports.
#pragma once

#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/config.h"

namespace tune {

using HfArguments = std::map<std::string, nlohmann::json>;

// Appends to `cannot` what TrainingArguments cannot express of `c`.
HfArguments hf_arguments(const TrialConfig& c, std::vector<std::string>& cannot);

}  // namespace tune
