// The configuration as a DeepSpeed config JSON (ds_config.json).
#pragma once

#include <optional>
#include <string>

#include "core/config.h"
#include "exports/framework_export.h"

namespace tune {

FrameworkExport deepspeed_export(const TrialConfig& c);

// What DeepSpeed's ZeRO makes of the optimizer tune ran, for every export whose stack runs DeepSpeed's
// engine (its own JSON, and HF Trainer's `deepspeed` argument): nullopt when it runs the same update.
std::optional<std::string> deepspeed_zero_optimizer_difference(const TrialConfig& c);

}  // namespace tune
