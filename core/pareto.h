// Pareto front of configurations by peak memory (lower is better) and
// throughput (higher is better), and Pareto ranks (successive fronts) for
// pareto-first ordering of a sweep.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "core/config.h"
#include "core/framework_prediction.h"

namespace tune {

struct ParetoPoint {
    double memory = 0;      // peak bytes per rank (exact below 2^53)
    double throughput = 0;  // tokens/s; never NaN
};

// a dominates b: no worse in both, better in one. Equal points do not dominate each other.
inline bool dominates(const ParetoPoint& a, const ParetoPoint& b) {
    return a.memory <= b.memory && a.throughput >= b.throughput && (a.memory < b.memory || a.throughput > b.throughput);
}

// Indices of the non-dominated points, by memory ascending (ties: input order).
std::vector<std::size_t> pareto_front(std::span<const ParetoPoint> points);

// For each point, its front: 0 for the non-dominated, 1 for those of the rest, and so on.
// O(n log n).
std::vector<std::uint32_t> pareto_ranks(std::span<const ParetoPoint> points);

// Which trials a front is drawn over: the one rule for the sweep's terminal
// fronts, `tune estimate`, `tune best`, the report and the driver's ordering.
// Measured: finished ok with a peak and a finite throughput. Predicted: an
// estimate that fits the usable memory (a front never shows what does not fit).
std::optional<ParetoPoint> measured_point(const TrialResult& r);
std::optional<ParetoPoint> predicted_point(const TrialResult& r);
std::optional<ParetoPoint> predicted_point(const Estimate& e);
// A stack's prediction (core/framework_prediction.h): its device memory and tokens/s, when it
// can run the configuration and that memory fits.
std::optional<ParetoPoint> predicted_point(const FrameworkPrediction& p);

// Indices of the entries that have a point and are on its front, memory ascending.
std::vector<std::size_t> front_of(std::span<const std::optional<ParetoPoint>> points);

}  // namespace tune
