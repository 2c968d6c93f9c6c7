// The measured Pareto front as `tune sweep` prints it at the end of a run:
// each member's configuration, trial id, measured and estimated peak, tokens/s and MFU,
// and its tie within noise (reports/front_ties, as `tune report` and `tune
// best` mark them), with the legend when any member ties.
#pragma once

#include <span>
#include <string>

#include "store/records.h"

namespace tune {

// `front`: the front's records, memory ascending (core/pareto's order). "" for none.
std::string measured_front_text(std::span<const TrialRecord> front);

}  // namespace tune
