// One single-rank trial against the estimate the trial itself makes: the
// peak, every component and the phase of the peak are the same bytes.
#pragma once

#include <catch2/catch.hpp>

#include "core/presets.h"
#include "harness/trial.h"
#include "search/estimate.h"
#include "tests/support/trainer_fixture.h"

namespace tune::test {

inline void check_exact_agreement(const TrialConfig& c) {
    const TrialResult r = harness::run_trial(c, quiet_trial());
    INFO(summary(c) << ": " << r.reason);
    REQUIRE(r.status == TrialStatus::ok);
    EstimateOptions eo;
    eo.cpu_threads = 1;
    eo.overhead_bytes = r.baseline;  // the process before the model, as the trial estimates it
    const Estimate e = estimate(c, *find_device("cpu"), eo);
    CHECK(r.memory.peak == e.memory.peak);
    for (Component k : kComponents) {
        INFO(to_string(k) << ": measured " << r.memory[k] << ", estimated " << e.memory[k]);
        CHECK(r.memory[k] == e.memory[k]);
    }
    CHECK(r.memory.peak_phase == e.memory.peak_phase);
}

}  // namespace tune::test
