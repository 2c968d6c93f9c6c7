// Two sweeps side by side (H100 against A100, before and after a change):
// the configurations both contain, matched by config hash, or by the searched
// dimensions when the hashes differ (another device changes the memory limit,
// and so the hash, of the same point of the space).
#pragma once

#include <cstddef>
#include <optional>
#include <vector>

#include "reports/sweep_data.h"

namespace tune {

struct MatchedTrial {
    std::size_t baseline = 0;  // index into the baseline sweep's trials
    std::size_t other = 0;     // index into the other sweep's trials
    bool by_hash = false;      // false: matched by the searched dimensions
};

struct Comparison {
    std::vector<MatchedTrial> matched;  // in the baseline's trial order
    std::size_t by_hash = 0;
    std::size_t by_dimensions = 0;
    std::size_t both_ok = 0;
    std::optional<double> tokens_delta_median_pct;  // other vs baseline, over pairs both ok
    std::optional<double> peak_delta_median_pct;
};

Comparison compare_sweeps(const SweepData& baseline, const SweepData& other);

// Change from `from` to `to` in percent of `from`.
double delta_percent(double from, double to);

}  // namespace tune
