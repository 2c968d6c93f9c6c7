// One single-rank trial against the estimate the trial itself makes: the
// peak, every component and the phase of the peak are the same bytes, on the
// device's ledger and on the host's.
#pragma once

#include <catch2/catch.hpp>

#include "core/presets.h"
#include "estimate/estimate.h"
#include "tests/support/trainer_fixture.h"
#include "train/trial.h"

namespace tune::test {

struct TrialAndEstimate {
    TrialResult trial;
    Estimate estimate;
};

// Runs `c` (it must end ok) and estimates it as the trial itself does: one thread, the process's
// baseline before the model as the overhead.
inline TrialAndEstimate run_and_estimate(const TrialConfig& c) {
    TrialAndEstimate out{train::run_trial(c, quiet_trial()), {}};
    INFO(summary(c) << ": " << out.trial.reason);
    REQUIRE(out.trial.status == TrialStatus::ok);
    EstimateOptions eo;
    eo.cpu_threads = 1;
    eo.overhead_bytes = out.trial.baseline;
    out.estimate = estimate(c, *find_device("cpu"), eo);
    return out;
}

inline void check_exact_agreement(const TrialConfig& c) {
    const auto [r, e] = run_and_estimate(c);
    INFO(summary(c));
    CHECK(r.memory.peak == e.memory.peak);
    for (Component k : kComponents) {
        INFO(to_string(k) << ": measured " << r.memory[k] << ", estimated " << e.memory[k]);
        CHECK(r.memory[k] == e.memory[k]);
    }
    CHECK(r.memory.peak_phase == e.memory.peak_phase);
    // The host's ledger (offload): the same bytes too, and nothing without offload.
    CHECK(r.host_memory.peak == e.host_memory.peak);
    for (Component k : kComponents) {
        INFO("host " << to_string(k) << ": measured " << r.host_memory[k] << ", estimated " << e.host_memory[k]);
        CHECK(r.host_memory[k] == e.host_memory[k]);
    }
    CHECK(r.host_memory.peak_phase == e.host_memory.peak_phase);
}

}  // namespace tune::test
