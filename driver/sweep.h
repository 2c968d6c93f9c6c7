// The sweep: a sweep file to a finished, queryable set of results.
//
//   expand -> estimate -> prune -> order -> (claim -> run trial process -> record
//   -> recalibrate -> re-plan pending)* -> the measured Pareto front
//
// Every step goes through the store, so a crash or kill at any point loses at
// most the running trial, which the next run of the same command runs again.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "store/records.h"
#include "sweep/spec.h"

namespace tune {

// What the caller found out about this machine (the driver includes no kernels code).
struct SweepEnvironment {
    std::size_t visible_gpus = 0;
    std::string why_no_gpu;  // when visible_gpus is 0
    std::string host;
    std::string device_name;  // as the driver reports it, or the preset name
    SoftwareVersions software;
};

struct SweepOptions {
    std::string database;                     // empty: the sweep's [output] database
    bool dry_run = false;                     // estimate and record only
    std::optional<std::uint64_t> max_trials;  // stop starting trials after this many
    std::optional<SearchStrategy> strategy;   // overrides [search] strategy
    bool restart = false;                     // discard an existing sweep of this name
    bool progress_line = true;                // on stderr, when it is a terminal
    bool json_events = false;                 // JSON lines on stdout
    std::vector<std::string> trial_program;   // default {<this binary>, "trial"}
    double prune_tolerance = 0.02;            // the estimator's known relative memory error
    bool probe = false;                       // measure (or load cached) rates for the time model at start
};

struct SweepReport {
    SweepId sweep = 0;
    std::string database;
    bool estimate_only = false;
    std::string estimate_only_reason;  // why nothing was measured
    std::uint64_t trials_run = 0;      // by this invocation
    bool interrupted = false;
    bool budget_reached = false;
    bool max_trials_reached = false;
    RequeueCounts requeued;  // trials a dead driver had left running
    StatusCounts counts{};   // the whole sweep, at the end
    // What calibration learned from this invocation's ok trials (driver/calibration.h).
    std::size_t calibrated_trials = 0;
    double efficiency_factor = 1.0;     // measured / predicted speed (Calibration::efficiency_factor)
    double pace_exponent = 1.0;         // Calibration::pace_exponent
    double pace_prior = 1.0;            // the backend's (prior_pace_exponent), what it starts from
    double size_exponent = 0.0;         // Calibration::size_exponent, 0 the prior
    std::vector<double> memory_errors;  // per measured trial: (measured - estimated) / estimated peak
};

SweepReport run_sweep(SweepSpec spec, const SweepEnvironment& env, const SweepOptions& options);

// Why this sweep can only be estimated here, or "" when its trials can run.
std::string estimate_only_reason(const SweepSpec& spec, const SweepEnvironment& env, bool dry_run);

}  // namespace tune
