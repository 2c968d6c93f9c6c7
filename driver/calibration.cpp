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
    if (uncalibrated.tokens_per_s > 0 && r.tokens_per_s > 0) {
        // At the machine speed the estimate holds for: the host's pace during this
        // trial is not the estimator's error (core/machine_speed.h).
        const double tokens_per_s = r.tokens_per_s * machine_slowdown(r.speed_reference_s, uncalibrated.speed_reference_s);
        ratios_.push_back({r.config.optimizer, r.config.precision, std::log(tokens_per_s / uncalibrated.tokens_per_s)});
        fit_ = fit(ratios_);
    }
    if (const std::uint64_t overhead = r.memory[Component::overhead]; overhead > 0)
        overhead_ = std::max(overhead_.value_or(0), overhead);
}

// A few rounds of alternating means over at most a few hundred points: the
// effects settle in two or three rounds when both factors vary.
Calibration::Fit Calibration::fit(const std::vector<Ratio>& ratios) {
    const double overall = mean_log(ratios);
    std::array<double, kOptimizers.size()> by_optimizer{};
    std::array<double, kPrecisions.size()> by_precision{};
    for (int round = 0; round < 4; ++round) {
        std::array<double, kOptimizers.size()> sum_o{}, n_o{};
        for (const Ratio& r : ratios) {
            const auto o = static_cast<std::size_t>(r.optimizer);
            sum_o[o] += r.log_ratio - overall - by_precision[static_cast<std::size_t>(r.precision)];
            n_o[o] += 1;
        }
        for (std::size_t o = 0; o < by_optimizer.size(); ++o) by_optimizer[o] = n_o[o] > 0 ? sum_o[o] / n_o[o] : 0.0;
        std::array<double, kPrecisions.size()> sum_p{}, n_p{};
        for (const Ratio& r : ratios) {
            const auto p = static_cast<std::size_t>(r.precision);
            sum_p[p] += r.log_ratio - overall - by_optimizer[static_cast<std::size_t>(r.optimizer)];
            n_p[p] += 1;
        }
        for (std::size_t p = 0; p < by_precision.size(); ++p) by_precision[p] = n_p[p] > 0 ? sum_p[p] / n_p[p] : 0.0;
    }
    Fit f;
    for (std::size_t o = 0; o < f.optimizer.size(); ++o) f.optimizer[o] = std::exp(by_optimizer[o]);
    for (std::size_t p = 0; p < f.precision.size(); ++p) f.precision[p] = std::exp(by_precision[p]);
    return f;
}

// Geometric mean: a trial 2x faster and one 2x slower than predicted cancel.
double Calibration::efficiency_factor() const { return std::exp(mean_log(ratios_)); }

EstimateOptions Calibration::options() const {
    EstimateOptions o = base_;
    o.compute_efficiency = std::clamp(base_.compute_efficiency * efficiency_factor(), 1e-4, 1.0);
    for (std::size_t p = 0; p < o.precision_efficiency.size(); ++p)
        o.precision_efficiency[p] = std::clamp(base_.precision_efficiency[p] * fit_.precision[p], 1e-2, 1e2);
    for (std::size_t k = 0; k < o.optimizer_efficiency.size(); ++k)
        o.optimizer_efficiency[k] = std::clamp(base_.optimizer_efficiency[k] * fit_.optimizer[k], 1e-2, 1e2);
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
    for (std::size_t p = 0; p < fit_.precision.size(); ++p)
        change = std::max(change, relative(fit_.precision[p], since.fit_.precision[p]));
    for (std::size_t o = 0; o < fit_.optimizer.size(); ++o)
        change = std::max(change, relative(fit_.optimizer[o], since.fit_.optimizer[o]));
    const double overhead_now = static_cast<double>(overhead_.value_or(0));
    const double overhead_then = static_cast<double>(since.overhead_.value_or(0));
    if (overhead_now != overhead_then) change = std::max(change, 1.0);
    change = std::max(change, std::abs(prune_tolerance() - since.prune_tolerance()));
    return change;
}

}  // namespace tune
