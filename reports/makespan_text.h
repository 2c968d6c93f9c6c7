// The sweep's predicted makespan (kept in its plan when the driver created it,
// driver/makespan) beside the real one: first trial start to last trial end.
#pragma once

#include <optional>
#include <string>

#include "reports/sweep_data.h"

namespace tune {

// First start to last end over the trials that ran; nullopt when none did.
std::optional<double> real_makespan_s(const SweepData& sweep);

// "predicted 3m 10s (2 at a time), real 3m 30s: +10.5%", or "-" without a prediction.
std::string makespan_text(const SweepData& sweep);

}  // namespace tune
