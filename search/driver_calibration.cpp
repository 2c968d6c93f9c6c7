#include "search/driver_calibration.h"

#include <algorithm>
#include <cmath>

namespace tune {

void Calibration::observe(const TrialResult& r, const Estimate& uncalibrated) {
    if (r.status != TrialStatus::ok || r.memory.peak == 0) return;
    const Estimate& e = r.estimate.value_or(uncalibrated);
    if (e.memory.peak > 0)
        memory_errors_.push_back((static_cast<double>(r.memory.peak) - static_cast<double>(e.memory.peak)) /
                                 static_cast<double>(e.memory.peak));
    if (uncalibrated.tokens_per_s > 0 && r.tokens_per_s > 0)
        throughput_ratios_.push_back(r.tokens_per_s / uncalibrated.tokens_per_s);
    if (const std::uint64_t overhead = r.memory[Component::overhead]; overhead > 0)
        overhead_ = std::max(overhead_.value_or(0), overhead);
}

double Calibration::efficiency_factor() const {
    if (throughput_ratios_.empty()) return 1.0;
    // Geometric mean: a trial 2x faster and one 2x slower than predicted cancel.
    double log_sum = 0;
    for (double ratio : throughput_ratios_) log_sum += std::log(ratio);
    return std::exp(log_sum / static_cast<double>(throughput_ratios_.size()));
}

EstimateOptions Calibration::options() const {
    EstimateOptions o = base_;
    o.compute_efficiency = std::clamp(base_.compute_efficiency * efficiency_factor(), 1e-4, 1.0);
    if (overhead_) o.overhead_bytes = overhead_;
    return o;
}

double Calibration::prune_tolerance() const {
    double worst = 0;
    for (double e : memory_errors_) worst = std::max(worst, std::abs(e));
    return std::max(base_tolerance_, 1.5 * worst);
}

double Calibration::change_since(const Calibration& since) const {
    const double a = efficiency_factor(), b = since.efficiency_factor();
    double change = std::abs(a - b) / std::max(b, 1e-12);
    const double overhead_now = static_cast<double>(overhead_.value_or(0));
    const double overhead_then = static_cast<double>(since.overhead_.value_or(0));
    if (overhead_now != overhead_then) change = std::max(change, 1.0);
    change = std::max(change, std::abs(prune_tolerance() - since.prune_tolerance()));
    return change;
}

}  // namespace tune
