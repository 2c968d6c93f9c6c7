// The front's ties within noise (core/noise_ties.h), as the terminal and HTML
// fronts mark them: a member whose throughput is within the noise of a member
// with a smaller peak buys nothing measurable with its extra memory.
#pragma once

#include <span>
#include <string>
#include <vector>

#include "reports/sweep_data.h"

namespace tune {

// Per member of sweep.front: "= trial N" when it ties with trial N, else "".
std::vector<std::string> front_tie_marks(const SweepData& sweep);
// The same for a front given as its records, memory ascending (the sweep's end-of-run front).
std::vector<std::string> front_tie_marks(std::span<const TrialRecord* const> front);

// Per member of sweep.front: "2.1% (n=4)", the CV of its timed steps, or "" when not timed.
std::vector<std::string> front_noise_texts(const SweepData& sweep);

// What a tie mark means, for the legend under a front.
std::string front_tie_legend();

}  // namespace tune
