// A finished, measured trial with step-time statistics: the input of the
// tie-within-noise tests (tune best, the report's and the sweep's fronts).
#pragma once

#include <cstdint>

#include "store/store.h"

namespace tune::test {

inline TrialRecord timed_trial(TrialId id, double tokens_per_s, double median_s, double stddev_s, std::uint64_t peak,
                               std::uint64_t timed_steps) {
    TrialRecord t;
    t.id = id;
    t.measured = true;
    t.result.status = TrialStatus::ok;
    t.result.tokens_per_s = tokens_per_s;
    t.result.memory.peak = peak;
    t.median_step_s = median_s;
    t.stddev_step_s = stddev_s;
    t.timed_steps = timed_steps;
    return t;
}

}  // namespace tune::test
