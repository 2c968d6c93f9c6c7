// A configuration as LitGPT's fine-tuning config YAML (config_hub/finetune/*/lora.yaml:
// precision, quantize, devices, lora_*, train, optimizer), for
// `litgpt finetune_lora|finetune_full CHECKPOINT_DIR --config FILE`.
#pragma once

#include "core/config.h"
#include "exports/framework_export.h"

namespace tune {

FrameworkExport litgpt_export(const TrialConfig& c);

}  // namespace tune
