// The configuration as an accelerate config YAML (accelerate launch
// --config_file), with its TrainingArguments as comments: FSDP2 by default,
// FSDP1 on request, plain DDP for ZeRO-0 under either (FSDP2 has no NO_SHARD).
#pragma once

#include "core/config.h"
#include "exports/framework_export.h"

namespace tune {

FrameworkExport accelerate_export(const TrialConfig& c, int fsdp_version);

}  // namespace tune
