#include "driver/calibration.h"

#include <algorithm>
#include <cmath>

#include "core/machine_speed.h"
#include "core/step_statistics.h"

namespace tune {

namespace {

// How much faster the trial ran than predicted: from its median step where its timed
// steps are known (one step slowed by something else does not move a median, and the
// reports score the median), else from its throughput over the timed steps.
double measured_over_predicted(const TrialResult& r, const Estimate& predicted) {
    if (r.step_stats.count > 0 && r.step_stats.median_ms > 0 && predicted.step_s > 0)
        return predicted.step_s / (r.step_stats.median_ms / 1e3);
    if (r.tokens_per_s > 0 && predicted.tokens_per_s > 0) return r.tokens_per_s / predicted.tokens_per_s;
    return 0;
}

// What the machine held beyond the components the estimator predicts one by
// one: the real peak less the tagged peak outside the overhead, where the
// real peak was measured. On a CPU that is the process baseline plus what no
// tag saw (the GEMM library's packing buffers grow with the shapes it meets:
// 33 MiB of OpenBLAS's 256 MiB reservation for a hidden-1024 model, none of it
// at the baseline); on a GPU the device overhead already holds all of it.
std::uint64_t machine_overhead(const TrialResult& r) {
    const std::uint64_t tagged = r.memory.peak - std::min(r.memory.peak, r.memory[Component::overhead]);
    if (r.real_peak > tagged) return r.real_peak - tagged;
    return r.memory[Component::overhead];
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
        // The host's pace during this trial is not the estimator's error
        // (core/machine_speed.h): the fit takes it out, at the exponent it learns.
        const double slowdown = machine_slowdown(r.speed_reference_s, uncalibrated.speed_reference_s);
        const TrialConfig& c = r.config;
        ratios_.push_back({{static_cast<std::size_t>(c.optimizer), static_cast<std::size_t>(c.precision),
                            static_cast<std::size_t>(c.checkpointing), std::min<std::size_t>(c.zero_stage, 3),
                            static_cast<std::size_t>(c.offload)},
                           std::log(ratio),
                           std::log(slowdown),
                           std::log(static_cast<double>(c.micro_batch) * static_cast<double>(c.context))});
        fit_ = fit(ratios_, fit_, base_.pace_exponent);
    }
    if (const std::uint64_t overhead = machine_overhead(r); overhead > 0) {
        overheads_.push_back({static_cast<double>(r.memory[Component::activations]), static_cast<double>(overhead)});
        fit_overhead();
    }
}

void Calibration::fit_overhead() {
    const auto n = static_cast<double>(overheads_.size());
    double lo = overheads_.front().activations, hi = lo, mean_x = 0, mean_y = 0;
    for (const OverheadPoint& p : overheads_) {
        lo = std::min(lo, p.activations);
        hi = std::max(hi, p.activations);
        mean_x += p.activations / n;
        mean_y += p.overhead / n;
    }
    double slope = overhead_slope_prior_;
    if (overheads_.size() >= 2 && hi > kMinOverheadSpread * lo) {
        double covariance = 0, variance = 0;
        for (const OverheadPoint& p : overheads_) {
            covariance += (p.activations - mean_x) * (p.overhead - mean_y);
            variance += (p.activations - mean_x) * (p.activations - mean_x);
        }
        slope = std::clamp(covariance / variance, 0.0, 1.0);  // slack does not shrink as activations grow
    }
    overhead_slope_ = slope;
    overhead_ = static_cast<std::uint64_t>(std::max(0.0, std::round(mean_y - slope * mean_x)));
}

double prior_overhead_slope(BackendKind backend) { return backend == BackendKind::cuda ? 0.04 : 0.0; }

// A few rounds of alternating medians (Tukey's median polish) over at most a
// few hundred points: each dimension's effect is the median residual of its
// values after the overall factor and the other dimensions' effects, taken at
// the machine speed and micro-batch size the current exponents say. Then the
// exponents from what the effects leave, and the effects again at them.
Calibration::Fit Calibration::fit(const std::vector<Ratio>& ratios, const Fit& start, double pace_prior) {
    Fit f;
    // The last fit's exponents: one more trial moves them little.
    f.pace_exponent = start.pace_exponent;
    f.size_exponent = start.size_exponent;
    for (const Ratio& r : ratios) f.log_size_reference += r.log_tokens / static_cast<double>(ratios.size());
    fit_effects(ratios, f);
    // Each round moves the exponents a fraction of the way (the effects absorb some of
    // the pace where it varied with a dimension); from scratch a dozen rounds settle them.
    for (int round = 0; round < 16; ++round) {
        const Exponents e = fit_exponents(ratios, f, pace_prior);
        const bool settled = std::abs(e.pace - f.pace_exponent) < 1e-6 && std::abs(e.size - f.size_exponent) < 1e-6;
        f.pace_exponent = e.pace;
        f.size_exponent = e.size;
        if (settled) break;
        fit_effects(ratios, f);
    }
    return f;
}

void Calibration::fit_effects(const std::vector<Ratio>& ratios, Fit& f) {
    const auto adjusted = [&](const Ratio& r) {
        return r.log_ratio + f.pace_exponent * r.log_slowdown - f.size_exponent * (r.log_tokens - f.log_size_reference);
    };
    std::vector<double> all;
    for (const Ratio& r : ratios) all.push_back(adjusted(r));
    f.overall = median_of(all);
    f.effect = {};
    const auto others = [&](const Ratio& r, std::size_t skip) {
        double sum = 0;
        for (std::size_t d = 0; d < kDims; ++d)
            if (d != skip) sum += f.effect[d][r.level[d]];
        return sum;
    };
    for (int round = 0; round < 4; ++round)
        for (std::size_t d = 0; d < kDims; ++d) {
            std::array<std::vector<double>, 5> residuals;
            for (const Ratio& r : ratios) residuals[r.level[d]].push_back(adjusted(r) - f.overall - others(r, d));
            for (std::size_t v = 0; v < kLevels[d]; ++v) f.effect[d][v] = median_of(residuals[v]);
        }
}

// Least squares of what the effects leave unexplained on the log slowdown
// and the log tokens together: a step that slows as the reference does
// leaves -1 x log slowdown. A regressor that did not vary by kMinSlopeSpread
// (standard deviation of its log) over kMinSlopeTrials trials or more keeps
// its prior (pace: the backend's, size 0), and its part is taken out first.
Calibration::Exponents Calibration::fit_exponents(const std::vector<Ratio>& ratios, const Fit& f, double pace_prior) {
    const double n = static_cast<double>(ratios.size());
    const double mz = f.log_size_reference;  // the mean log tokens
    double mx = 0;
    for (const Ratio& r : ratios) mx += r.log_slowdown / n;
    double xx = 0, zz = 0, xz = 0;
    for (const Ratio& r : ratios) {
        const double x = r.log_slowdown - mx, z = r.log_tokens - mz;
        xx += x * x, zz += z * z, xz += x * z;
    }
    const bool enough = ratios.size() >= kMinSlopeTrials;
    const bool pace = enough && xx / n >= kMinSlopeSpread * kMinSlopeSpread;
    const bool size = enough && zz / n >= kMinSlopeSpread * kMinSlopeSpread;
    // y = overall' - pace x + size z: regress -y on x and y on z (centered).
    double my = 0;
    std::vector<double> ys;
    for (const Ratio& r : ratios) {
        double y = r.log_ratio - f.overall;
        for (std::size_t d = 0; d < kDims; ++d) y -= f.effect[d][r.level[d]];
        if (!pace) y += pace_prior * r.log_slowdown;  // the prior's part
        ys.push_back(y);
        my += y / n;
    }
    double xy = 0, zy = 0;
    for (std::size_t i = 0; i < ratios.size(); ++i) {
        xy += (ratios[i].log_slowdown - mx) * (ys[i] - my);
        zy += (ratios[i].log_tokens - mz) * (ys[i] - my);
    }
    Exponents e{pace_prior, 0.0};
    if (pace && size && xx * zz - xz * xz > 1e-12 * xx * zz) {
        // Normal equations of y = a x + b z: a = -pace, b = size.
        const double det = xx * zz - xz * xz;
        e.pace = -(xy * zz - zy * xz) / det;
        e.size = (zy * xx - xy * xz) / det;
    } else if (pace) {
        e.pace = -xy / xx;
    } else if (size) {
        e.size = zy / zz;
    }
    return {std::clamp(e.pace, 0.0, 2.0), std::clamp(e.size, -1.0, 1.0)};
}

// In log space, so a trial 2x faster and one 2x slower than predicted cancel; the
// median, so one trial 10x off moves nothing.
double Calibration::efficiency_factor() const { return std::exp(fit_.overall); }

EstimateOptions Calibration::options() const {
    EstimateOptions o = base_;
    o.compute_efficiency = std::clamp(base_.compute_efficiency * efficiency_factor(), 1e-4, 1.0);
    const auto apply = [&](auto& learned, const auto& from, Dim d) {
        for (std::size_t v = 0; v < learned.size(); ++v) learned[v] = std::clamp(from[v] * factor(d, v), 1e-2, 1e2);
    };
    apply(o.precision_efficiency, base_.precision_efficiency, kPrecisionDim);
    apply(o.optimizer_efficiency, base_.optimizer_efficiency, kOptimizerDim);
    apply(o.checkpointing_efficiency, base_.checkpointing_efficiency, kCheckpointingDim);
    apply(o.zero_efficiency, base_.zero_efficiency, kZeroDim);
    apply(o.offload_efficiency, base_.offload_efficiency, kOffloadDim);
    o.pace_exponent = fit_.pace_exponent;
    o.size_exponent = fit_.size_exponent;
    o.size_reference_tokens = std::exp(fit_.log_size_reference);
    if (overhead_) {
        o.overhead_bytes = overhead_;
        o.overhead_per_activation_byte = overhead_slope_;
    }
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
    change = std::max(change, std::abs(pace_exponent() - since.pace_exponent()));
    change = std::max(change, std::abs(size_exponent() - since.size_exponent()));
    const double overhead_now = static_cast<double>(overhead_.value_or(0));
    const double overhead_then = static_cast<double>(since.overhead_.value_or(0));
    // Any move of the overhead line re-plans, and it moves with nearly every trial: pending estimates
    // stay fresh. Re-planning only at a 1% move, as for the factors, left a demo sweep's step-time
    // estimates 3.9% off after calibration (1.6-2.2% in five sweeps before), their staleness adding up.
    if (overhead_now != overhead_then || overhead_slope_ != since.overhead_slope_) change = std::max(change, 1.0);
    change = std::max(change, std::abs(prune_tolerance() - since.prune_tolerance()));
    return change;
}

}  // namespace tune
