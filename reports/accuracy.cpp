#include "reports/accuracy.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include <fmt/format.h>

#include "core/machine_speed.h"
#include "reports/report_format.h"

namespace tune {
namespace {

double quantile_of_sorted(const std::vector<double>& sorted, double q) {
    if (sorted.empty()) return 0;
    const double pos = q * static_cast<double>(sorted.size() - 1);
    const auto lo = static_cast<std::size_t>(std::floor(pos));
    const auto hi = std::min(lo + 1, sorted.size() - 1);
    return sorted[lo] + (sorted[hi] - sorted[lo]) * (pos - static_cast<double>(lo));
}

void add_sample(std::vector<ErrorSample>& out, std::size_t trial, double estimated, double measured) {
    if (!(measured > 0) || !(estimated > 0)) return;
    out.push_back({trial, estimated, measured, error_percent(estimated, measured)});
}

}  // namespace

Accuracy estimator_accuracy(const SweepData& sweep) {
    Accuracy a;
    std::optional<Timestamp> latest;  // the started_at a.pace_exponent was taken from
    for (std::size_t i = 0; i < sweep.trials.size(); ++i) {
        const TrialRecord& t = sweep.trials[i];
        const auto& est = t.result.estimate;
        if (!est) continue;
        if (t.result.status == TrialStatus::oom && est->fits) ++a.fit_but_oom;
        if (t.result.status != TrialStatus::ok || !t.measured) continue;
        add_sample(a.memory, i, static_cast<double>(est->memory.peak), static_cast<double>(t.result.memory.peak));
        if (auto step = measured_step_s(t)) {
            add_sample(a.step, i, est->step_s, *step);
            if (t.base_step_s) add_sample(a.step_before_calibration, i, *t.base_step_s, *step);
            if (t.result.speed_reference_s > 0 && est->speed_reference_s > 0) {
                // The calibrated estimate at the pace exponent it was made with;
                // the one before calibration at the prior, 1.
                const double slowdown = machine_slowdown(t.result);
                a.slowdowns.push_back(slowdown);
                if (!latest || (t.started_at && *t.started_at >= *latest)) {
                    a.pace_exponent = est->pace_exponent;  // the last to start ran with the most learned
                    latest = t.started_at;
                }
                add_sample(a.step_at_trial_speed, i, est->step_s * pace_factor(t.result), *step);
                if (t.base_step_s)
                    add_sample(a.step_before_calibration_at_trial_speed, i, *t.base_step_s * slowdown, *step);
            }
        }
        add_sample(a.real_memory, i, static_cast<double>(est->memory.peak), static_cast<double>(t.result.real_peak));
    }
    a.real_memory_summary = summarize(a.real_memory);
    a.memory_summary = summarize(a.memory);
    a.step_summary = summarize(a.step);
    a.step_before_calibration_summary = summarize(a.step_before_calibration);
    a.step_at_trial_speed_summary = summarize(a.step_at_trial_speed);
    a.step_before_calibration_at_trial_speed_summary = summarize(a.step_before_calibration_at_trial_speed);
    return a;
}

double real_peak_error(const Estimate& e, const TrialResult& r) {
    return error_percent(static_cast<double>(e.memory.peak), static_cast<double>(r.real_peak));
}

std::optional<double> peak_error(const TrialResult& r) {
    if (!r.estimate) return std::nullopt;
    if (r.real_peak > 0) return real_peak_error(*r.estimate, r);
    if (r.memory.peak == 0) return std::nullopt;
    return error_percent(static_cast<double>(r.estimate->memory.peak), static_cast<double>(r.memory.peak));
}

std::string step_error_medians_text(const Accuracy& a) {
    const ErrorSummary& before = a.step_before_calibration_summary;
    const ErrorSummary& after = a.step_summary;
    if (after.count == 0) return {};
    if (before.count == 0)
        return fmt::format(
            "Median |step-time error|: {:.1f}% as calibrated (n={}); the estimates before calibration "
            "were not kept (a database from before schema 7).",
            after.median_abs_pct, after.count);
    std::string text = fmt::format(
        "Median |step-time error|: {:.1f}% before any trial fed calibration (n={}), {:.1f}% "
        "after (the calibrated estimate each trial ran with, n={}).",
        before.median_abs_pct, before.count, after.median_abs_pct, after.count);
    const ErrorSummary& before_paced = a.step_before_calibration_at_trial_speed_summary;
    if (before_paced.count > 0 && !a.slowdowns.empty()) {
        const auto [slowest, fastest] = std::minmax_element(a.slowdowns.begin(), a.slowdowns.end());
        text += fmt::format(
            " At each trial's machine speed (its speed reference against the probes', which ranged "
            "{:.2f}x to {:.2f}x): {:.1f}% before calibration (n={}), {:.1f}% after (n={}).",
            *slowest, *fastest, before_paced.median_abs_pct, before_paced.count,
            a.step_at_trial_speed_summary.median_abs_pct, a.step_at_trial_speed_summary.count);
        if (a.pace_exponent != 1)
            text += fmt::format(" Calibration learned that a step slows as the reference's time to the power {:.2f}.",
                                a.pace_exponent);
    }
    return text;
}

ErrorSummary summarize(const std::vector<ErrorSample>& samples) {
    ErrorSummary s;
    s.count = samples.size();
    if (samples.empty()) return s;
    std::vector<double> abs;
    abs.reserve(samples.size());
    double signed_sum = 0;
    for (const auto& e : samples) {
        signed_sum += e.error_pct;
        abs.push_back(std::fabs(e.error_pct));
        if (std::fabs(e.error_pct) <= 10.0) ++s.within_10pct;
    }
    std::sort(abs.begin(), abs.end());
    double abs_sum = 0;
    for (double v : abs) abs_sum += v;
    const auto n = static_cast<double>(samples.size());
    s.bias_pct = signed_sum / n;
    s.mean_abs_pct = abs_sum / n;
    s.median_abs_pct = quantile_of_sorted(abs, 0.5);
    s.p90_abs_pct = quantile_of_sorted(abs, 0.9);
    s.max_abs_pct = abs.back();
    return s;
}

std::vector<HistogramBin> error_histogram(const Accuracy& accuracy) {
    constexpr double inf = std::numeric_limits<double>::infinity();
    std::vector<HistogramBin> bins;
    bins.push_back({-inf, -50, 0, 0});
    for (int from = -50; from < 50; from += 10) bins.push_back({double(from), double(from + 10), 0, 0});
    bins.push_back({50, inf, 0, 0});
    const auto bin_of = [&](double pct) {
        for (std::size_t b = 0; b < bins.size(); ++b)
            if (pct < bins[b].to_pct) return b;
        return bins.size() - 1;
    };
    for (const auto& e : accuracy.memory) ++bins[bin_of(e.error_pct)].memory;
    for (const auto& e : accuracy.step) ++bins[bin_of(e.error_pct)].step;
    return bins;
}

std::vector<ErrorSample> worst(const std::vector<ErrorSample>& samples, std::size_t n) {
    std::vector<ErrorSample> out = samples;
    const auto by_abs = [](const ErrorSample& a, const ErrorSample& b) {
        return std::fabs(a.error_pct) != std::fabs(b.error_pct) ? std::fabs(a.error_pct) > std::fabs(b.error_pct)
                                                                : a.trial < b.trial;
    };
    const std::size_t keep = std::min(n, out.size());
    std::partial_sort(out.begin(), out.begin() + static_cast<std::ptrdiff_t>(keep), out.end(), by_abs);
    out.resize(keep);
    return out;
}

}  // namespace tune
