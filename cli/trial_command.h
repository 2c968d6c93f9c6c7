// The exact `tune trial ...` command line that reproduces a configuration,
// quoted for a POSIX shell. Preset models are named; any other model (or a
// setting that has no flag) travels whole as `--config '<json>'`.
#pragma once

#include <string>
#include <string_view>

#include "core/config.h"

namespace tune {

std::string trial_command(const TrialConfig& config);

// `text` as one shell word: as is when it holds only safe characters, else in single
// quotes with every ' written as '\'' (safe for any bytes but NUL).
std::string shell_quote(std::string_view text);

}  // namespace tune
