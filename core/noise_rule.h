// The minimum-time rule of a trial (the sweep's [trial] max_cv and max_steps):
// a trial whose timed steps vary more than max_cv (coefficient of variation,
// stddev / mean, as core/step_statistics computes it) runs more steps, one at
// a time, until they vary less or it has run max_steps in all.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace tune {

struct NoiseRule {
    double max_cv = 0;            // 0: never more steps
    std::uint32_t max_steps = 0;  // steps in all, warm-up included; at most the configured steps: none
};

// Whether a trial that has run step_ms.size() steps (`warmup` of them warm-up) runs another.
bool needs_more_steps(const std::vector<double>& step_ms, std::size_t warmup, const NoiseRule& rule);

}  // namespace tune
