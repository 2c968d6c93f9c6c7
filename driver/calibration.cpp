#include "driver/calibration.h"

#include <algorithm>
#include <cmath>

#include "core/machine_speed.h"

namespace tune {

namespace {

double mean_log(const auto& ratios) {
    double sum = 0;
    for (const auto& r : ratios) sum += r.log_ratio;
    return ratios.empty() ? 0.0 : sum / static_cast<double>(ratios.size());
}

// How much faster the trial ran than predicted: from its median step where its timed
// steps are known (one step slowed by something else does not move a median, and the
// reports score the median), else from its throughput over the timed steps.
double measured_over_predicted(const TrialResult& r, const Estimate& predicted) {
    if (r.step_stats.count > 0 && r.step_stats.median_ms > 0 && predicted.step_s > 0)
        return predicted.step_s / (r.step_stats.median_ms / 1e3);
    if (r.tokens_per_s > 0 && predicted.tokens_per_s > 0) return r.tokens_per_s / predicted.tokens_per_s;
    return 0;
}

}  // namespace

void Calibration::observe(const TrialResult& r, const Estimate& uncalibrated) {
    if (r.status != TrialStatus::ok || r.memory.peak == 0) return;
    const Estimate& e = r.estimate.value_or(uncalibrated);
    // The error of what the estimator predicts, outside the overhead it learns
    // from the same measurement (a CPU process's baseline, a GPU's runtime).
    const auto predicted = [](const MemoryBreakdown& m) {
        return static_cast<double>(m.peak) - static_cast<double>(std::min(m.peak, m[Component::overhead]));
    };
    if (predicted(e.memory) > 0)
        memory_errors_.push_back((predicted(r.memory) - predicted(e.memory)) / predicted(e.memory));
    if (const double ratio = measured_over_predicted(r, uncalibrated); ratio > 0) {
        // At the machine speed the estimate holds for: the host's pace during this
        // trial is not the estimator's error (core/machine_speed.h).
        const double paced = ratio * machine_slowdown(r.speed_reference_s, uncalibrated.speed_reference_s);
        const TrialConfig& c = r.config;
        ratios_.push_back({{static_cast<std::size_t>(c.optimizer), static_cast<std::size_t>(c.precision),
                            static_cast<std::size_t>(c.checkpointing), std::min<std::size_t>(c.zero_stage, 3)},
                           std::log(paced)});
        fit_ = fit(ratios_);
    }
    if (const std::uint64_t overhead = r.memory[Component::overhead]; overhead > 0)
        overhead_ = std::max(overhead_.value_or(0), overhead);
}

// A few rounds of alternating means over at most a few hundred points: each
// dimension's effect is the mean residual of its values after the overall
// factor and the other dimensions' effects; they settle in a few rounds when
// the dimensions vary together.
Calibration::Fit Calibration::fit(const std::vector<Ratio>& ratios) {
    const double overall = mean_log(ratios);
    Fit effect{};
    const auto others = [&](const Ratio& r, std::size_t skip) {
        double sum = 0;
        for (std::size_t d = 0; d < kDims; ++d)
            if (d != skip) sum += effect[d][r.level[d]];
        return sum;
    };
    for (int round = 0; round < 4; ++round)
        for (std::size_t d = 0; d < kDims; ++d) {
            std::array<double, 5> sum{}, n{};
            for (const Ratio& r : ratios) {
                sum[r.level[d]] += r.log_ratio - overall - others(r, d);
                n[r.level[d]] += 1;
            }
            for (std::size_t v = 0; v < kLevels[d]; ++v) effect[d][v] = n[v] > 0 ? sum[v] / n[v] : 0.0;
        }
    return effect;
}

// Geometric mean: a trial 2x faster and one 2x slower than predicted cancel.
double Calibration::efficiency_factor() const { return std::exp(mean_log(ratios_)); }

EstimateOptions Calibration::options() const {
    EstimateOptions o = base_;
    o.compute_efficiency = std::clamp(base_.compute_efficiency * efficiency_factor(), 1e-4, 1.0);
    const auto apply = [&](auto& learned, const auto& from, Dim d) {
        for (std::size_t v = 0; v < learned.size(); ++v)
            learned[v] = std::clamp(from[v] * factor(d, v), 1e-2, 1e2);
    };
    apply(o.precision_efficiency, base_.precision_efficiency, kPrecisionDim);
    apply(o.optimizer_efficiency, base_.optimizer_efficiency, kOptimizerDim);
    apply(o.checkpointing_efficiency, base_.checkpointing_efficiency, kCheckpointingDim);
    apply(o.zero_efficiency, base_.zero_efficiency, kZeroDim);
    if (overhead_) o.overhead_bytes = overhead_;
    return o;
}

double Calibration::prune_tolerance() const {
    double worst = 0;
    for (double e : memory_errors_) worst = std::max(worst, std::abs(e));
    return std::max(base_tolerance_, 1.5 * worst);
}

double Calibration::change_since(const Calibration& since) const {
    auto relative = [](double now, double then) { return std::abs(now - then) / std::max(then, 1e-12); };
    double change = relative(efficiency_factor(), since.efficiency_factor());
    for (std::size_t d = 0; d < kDims; ++d)
        for (std::size_t v = 0; v < kLevels[d]; ++v)
            change = std::max(change, relative(factor(Dim(d), v), since.factor(Dim(d), v)));
    const double overhead_now = static_cast<double>(overhead_.value_or(0));
    const double overhead_then = static_cast<double>(since.overhead_.value_or(0));
    if (overhead_now != overhead_then) change = std::max(change, 1.0);
    change = std::max(change, std::abs(prune_tolerance() - since.prune_tolerance()));
    return change;
}

}  // namespace tune
