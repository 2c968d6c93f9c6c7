// A configuration as torchtitan's job-config TOML (torchtitan/config/job_config.py:
// [model], [optimizer], [lr_scheduler], [training], [parallelism],
// [activation_checkpoint]), for `torchrun ... -m torchtitan.train --job.config_file`.
#pragma once

#include "core/config.h"
#include "exports/framework_export.h"

namespace tune {

FrameworkExport torchtitan_export(const TrialConfig& c);

}  // namespace tune
