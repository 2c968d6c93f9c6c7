// The configuration as Hugging Face TrainingArguments (JSON) and as a
// torchrun command line over a Trainer script; ZeRO 1-3 go through DeepSpeed,
// the Trainer's own route to them.
#pragma once

#include "core/config.h"
#include "exports/framework_export.h"

namespace tune {

FrameworkExport hf_trainer_export(const TrialConfig& c);
FrameworkExport torchrun_export(const TrialConfig& c);

}  // namespace tune
