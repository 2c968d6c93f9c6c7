// The configuration as a DeepSpeed config JSON (ds_config.json).
#pragma once

#include "core/config.h"
#include "exports/framework_export.h"

namespace tune {

FrameworkExport deepspeed_export(const TrialConfig& c);

}  // namespace tune
