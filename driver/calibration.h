// What measured trials teach the estimator during a sweep: how efficient the
// device really is (tokens/s measured over predicted), overall and per
// precision, optimizer, checkpointing mode and ZeRO stage (which reorders the predicted front, so
// pareto-first reaches the measured one sooner), how a step follows the
// machine's pace (core/machine_speed.h), how much memory lies
// outside our allocator (device overhead), and how far the memory estimate
// has been off, so pruning can leave room for that error.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <vector>

#include "core/config.h"
#include "estimate/estimate_options.h"

namespace tune {

class Calibration {
public:
    // `overhead_slope_prior`: the overhead's bytes per activation byte until
    // trials far enough apart in activations fit it (prior_overhead_slope).
    explicit Calibration(EstimateOptions base, double prune_tolerance = 0.02, double overhead_slope_prior = 0.0)
        : base_(base), base_tolerance_(prune_tolerance), overhead_slope_prior_(overhead_slope_prior) {
        fit_.pace_exponent = base.pace_exponent;
    }

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
    // Whether the pending trials' estimates should be made again: a change of
    // kReplanChange or more. Each trial runs with, and is judged at, the
    // estimate stored when it was claimed, so this is how stale that may be;
    // a re-plan costs milliseconds, so it may be small.
    bool moved_since(const Calibration& since) const { return change_since(since) >= kReplanChange; }
    static constexpr double kReplanChange = 0.01;

    std::size_t observations() const { return ratios_.size(); }
    // Per measured trial: (measured - estimated) / estimated peak bytes.
    const std::vector<double>& memory_errors() const { return memory_errors_; }
    // Measured over predicted speed, overall (the median of the log ratios, at each trial's pace).
    double efficiency_factor() const;
    // How much faster (> 1) or slower a precision, an optimizer, a checkpointing
    // mode or a ZeRO stage ran than the overall factor says; 1 until one has been measured.
    double precision_factor(Precision p) const { return factor(kPrecisionDim, static_cast<std::size_t>(p)); }
    double optimizer_factor(Optimizer o) const { return factor(kOptimizerDim, static_cast<std::size_t>(o)); }
    double checkpointing_factor(Checkpointing c) const {
        return factor(kCheckpointingDim, static_cast<std::size_t>(c));
    }
    double zero_factor(std::uint32_t stage) const { return factor(kZeroDim, stage); }
    double offload_factor(Offload o) const { return factor(kOffloadDim, static_cast<std::size_t>(o)); }
    // The step's time as a power of the speed reference's (Estimate::pace_exponent):
    // fitted once kMinSlopeTrials trials ran at paces at least kMinSlopeSpread apart
    // (standard deviation of the log slowdown), the base options' (the prior) until then.
    double pace_exponent() const { return fit_.pace_exponent; }
    double pace_prior() const { return base_.pace_exponent; }
    // How speed, measured over estimated, grows as a power of a micro-batch's
    // tokens (EstimateOptions::size_exponent): fitted once kMinSlopeTrials
    // trials ran micro-batches of sizes that far apart, 0 until then. On the
    // demo's CPU host it is about 0.14: what the step does per micro-batch
    // beyond the probed ops (allocation, launch of each op, the loop) is not
    // in the estimate, so it runs short for small micro-batches and long for
    // large ones; a factor per context could not carry to a context not yet run.
    double size_exponent() const { return fit_.size_exponent; }
    static constexpr std::size_t kMinSlopeTrials = 8;
    static constexpr double kMinSlopeSpread = 0.05;
    // What lies outside the components the estimator predicts one by one, as
    // overhead + slope x the activations at the peak (EstimateOptions::
    // overhead_bytes, overhead_per_activation_byte): least squares over the
    // trials once their activations span kMinOverheadSpread (the largest over
    // the smallest), else the prior slope and the mean intercept; unset until
    // a trial measured it. A line, not a constant: a GPU pool's slack grows
    // with the activations (docs/memory-model.md).
    std::optional<std::uint64_t> overhead() const { return overhead_; }
    double overhead_slope() const { return overhead_slope_; }
    static constexpr double kMinOverheadSpread = 1.05;

private:
    // The dimensions whose effects are fitted, and how many values each has.
    enum Dim : std::size_t { kOptimizerDim, kPrecisionDim, kCheckpointingDim, kZeroDim, kOffloadDim, kDims };
    static constexpr std::array<std::size_t, kDims> kLevels{kOptimizers.size(), kPrecisions.size(),
                                                            kCheckpointings.size(), 4, kOffloads.size()};
    struct Ratio {
        std::array<std::size_t, kDims> level;  // the configuration's value in each dimension
        double log_ratio;     // log(measured / uncalibrated estimated speed), at the trial's machine speed
        double log_slowdown;  // log(the trial's speed reference / the probes'), 0 unknown
        double log_tokens;    // log(tokens per micro-batch)
    };
    // log ratio + pace x log slowdown - size x (log tokens - reference) =
    // overall + one effect per dimension: the effects by alternating medians
    // (one disturbed trial moves none), the two exponents by least squares on
    // what they leave; the factors are exponentials.
    struct Fit {
        double overall = 0;
        std::array<std::array<double, 5>, kDims> effect{};
        double pace_exponent = 1;
        double size_exponent = 0;
        double log_size_reference = 0;  // the mean log tokens of the trials fitted
    };
    struct Exponents {
        double pace, size;
    };
    static Fit fit(const std::vector<Ratio>& ratios, const Fit& start, double pace_prior);
    static void fit_effects(const std::vector<Ratio>& ratios, Fit& f);
    static Exponents fit_exponents(const std::vector<Ratio>& ratios, const Fit& f, double pace_prior);
    double factor(Dim d, std::size_t level) const { return level < kLevels[d] ? std::exp(fit_.effect[d][level]) : 1.0; }

    EstimateOptions base_;
    double base_tolerance_;
    std::vector<Ratio> ratios_;
    Fit fit_{};  // effects (logs), 0 until measured
    std::vector<double> memory_errors_;
    struct OverheadPoint {
        double activations, overhead;  // bytes at the trial's peak, and beyond its tagged components
    };
    void fit_overhead();

    double overhead_slope_prior_;
    std::vector<OverheadPoint> overheads_;
    std::optional<std::uint64_t> overhead_;  // fitted intercept
    double overhead_slope_ = 0;
};

// The overhead's bytes per activation byte a sweep starts from: on CUDA the
// stream-ordered pool's slack, as measured on an H100 (the GPU results in docs/results/);
// on the CPU 0 (the page pool keeps none).
double prior_overhead_slope(BackendKind backend);

}  // namespace tune
