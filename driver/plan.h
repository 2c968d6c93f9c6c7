// The sweep's plan: every enumerated configuration estimated, the ones that
// cannot fit pruned (with the estimator's known error as slack, so borderline
// ones are settled by measurement), and the survivors given a run priority.
#pragma once

#include <span>
#include <string>
#include <vector>

#include "estimate/estimate_options.h"
#include "store/records.h"
#include "sweep/space.h"
#include "sweep/spec.h"

namespace tune {

struct PlanSettings {
    EstimateOptions estimate;       // calibrated options
    double prune_tolerance = 0.02;  // relative memory error the estimator may have
    SearchStrategy strategy = SearchStrategy::pareto_first;
};

// OpenMP threads each rank of a CPU-backend trial gets: the cores of its slot
// (driver/slots: the machine's, or its share when trials run at once) shared by
// the trial's ranks (OMP_NUM_THREADS, when set, wins). The driver
// passes it to every trial and to the estimator, whose attention scratch
// scales with it, so both size the same workspace.
std::uint32_t cpu_threads_per_rank(const SweepSpec& spec);

// The estimator options a sweep starts from.
EstimateOptions base_estimate_options(const SweepSpec& spec);

// Why a configuration with this estimate is pruned, or "" when it should run: the
// sweep's framework's device view first (where the user trains), then our engine's peak.
std::string prune_reason(const Estimate& e, const FrameworkPredictions& frameworks, const SweepSpec& spec,
                         double tolerance);

// Estimates, prunes and orders every candidate (invalid ones keep their reason), with the
// sweep's base settings: each estimate's step time is also kept as the uncalibrated one.
std::vector<NewTrial> plan_trials(const SweepSpec& spec, const std::vector<Candidate>& candidates,
                                  const PlanSettings& settings);

// Re-estimates pending trials with a new calibration: new estimates, priorities,
// and pruning of the ones that no longer fit.
std::vector<PendingUpdate> replan_pending(const SweepSpec& spec, const std::vector<TrialRecord>& pending,
                                          const PlanSettings& settings);

// Priorities for the given estimates: pareto-first orders by predicted Pareto
// rank (memory vs tokens/s), faster first within a rank; grid keeps the order given.
std::vector<double> priorities(std::span<const Estimate* const> estimates, SearchStrategy strategy);

}  // namespace tune
