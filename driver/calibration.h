// What measured trials teach the estimator during a sweep: how efficient the
// device really is (tokens/s measured over predicted), overall and per
// precision and per optimizer (which reorders the predicted front, so
// pareto-first reaches the measured one sooner), how much memory lies
// outside our allocator (device overhead), and how far the memory estimate
// has been off, so pruning can leave room for that error.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <vector>

#include "core/config.h"
#include "search/estimate_options.h"

namespace tune {

class Calibration {
public:
    explicit Calibration(EstimateOptions base, double prune_tolerance = 0.02)
        : base_(base), base_tolerance_(prune_tolerance) {}

    // Learns from one finished trial: `result.estimate` is the estimate it was
    // pruned and ordered with; `uncalibrated` the same configuration estimated
    // with the base options, which throughput ratios are taken against so
    // they stay comparable as the calibration moves.
    void observe(const TrialResult& result, const Estimate& uncalibrated);

    // The estimator's settings with what has been learned applied.
    EstimateOptions options() const;

    // Relative memory error allowed before a configuration is pruned: the
    // larger of the base tolerance and 1.5x the worst error seen so far.
    double prune_tolerance() const;

    // How much the calibration moved since `since` (max relative change), to
    // decide whether pending trials need re-estimating.
    double change_since(const Calibration& since) const;

    std::size_t observations() const { return ratios_.size(); }
    // Per measured trial: (measured - estimated) / estimated peak bytes.
    const std::vector<double>& memory_errors() const { return memory_errors_; }
    // Measured over predicted tokens/s, overall (geometric mean).
    double efficiency_factor() const;
    // How much faster (> 1) or slower a precision or an optimizer ran than
    // the overall factor says; 1 until one has been measured.
    double precision_factor(Precision p) const { return fit_.precision[static_cast<std::size_t>(p)]; }
    double optimizer_factor(Optimizer o) const { return fit_.optimizer[static_cast<std::size_t>(o)]; }

private:
    struct Ratio {
        Optimizer optimizer;
        Precision precision;
        double log_ratio;  // log(measured / uncalibrated estimated tokens/s)
    };
    // log ratio = overall + optimizer effect + precision effect, fitted by
    // alternating means; the factors are the exponentials of the effects.
    struct Fit {
        std::array<double, kPrecisions.size()> precision{1.0, 1.0, 1.0, 1.0};
        std::array<double, kOptimizers.size()> optimizer{1.0, 1.0, 1.0, 1.0, 1.0};
    };
    static Fit fit(const std::vector<Ratio>& ratios);

    EstimateOptions base_;
    double base_tolerance_;
    std::vector<Ratio> ratios_;
    Fit fit_;
    std::vector<double> memory_errors_;
    std::optional<std::uint64_t> overhead_;  // largest measured device overhead
};

}  // namespace tune
