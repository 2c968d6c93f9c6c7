// How far the analytic estimator was from what the trials measured: peak
// memory and step time, per trial and summarized, plus the worst misses.
// Only trials that finished ok and carry an estimate count.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "reports/sweep_data.h"

namespace tune {

struct ErrorSample {
    std::size_t trial = 0;  // index into SweepData::trials
    double estimated = 0;   // bytes or seconds
    double measured = 0;
    double error_pct = 0;  // (estimated - measured) / measured
};

struct ErrorSummary {
    std::size_t count = 0;
    double bias_pct = 0;  // mean signed error: > 0 means the estimator overestimates
    double mean_abs_pct = 0;
    double median_abs_pct = 0;
    double p90_abs_pct = 0;
    double max_abs_pct = 0;
    std::size_t within_10pct = 0;
};

struct HistogramBin {
    double from_pct = 0;  // inclusive
    double to_pct = 0;    // exclusive; the outer bins are open-ended
    std::size_t memory = 0;
    std::size_t step = 0;
};

struct Accuracy {
    std::vector<ErrorSample> memory;  // peak memory
    std::vector<ErrorSample> step;    // seconds per optimizer step, the calibrated estimate the sweep used
    // The same against the estimate before any trial fed calibration (the store's
    // est_base_step_s); empty for trials recorded before schema 7.
    std::vector<ErrorSample> step_before_calibration;
    // Both again with each estimate scaled to the machine speed its trial ran at
    // (core/machine_speed.h): the estimator's own error, without the host's pace.
    // Only trials with both speed references (schema 8, probed estimates).
    std::vector<ErrorSample> step_at_trial_speed;
    std::vector<ErrorSample> step_before_calibration_at_trial_speed;
    std::vector<double> slowdowns;  // per such trial: its speed reference over the probes'
    // The pace exponent (core/machine_speed.h) of the calibrated estimate of the one
    // among them that started last: what calibration had learned by the end; 1 when it learned nothing.
    double pace_exponent = 1;
    std::vector<ErrorSample> real_memory;  // estimated peak against the machine's real peak
    ErrorSummary memory_summary;
    ErrorSummary step_summary;
    ErrorSummary step_before_calibration_summary;
    ErrorSummary step_at_trial_speed_summary;
    ErrorSummary step_before_calibration_at_trial_speed_summary;
    ErrorSummary real_memory_summary;
    std::size_t fit_but_oom = 0;  // estimated to fit, then ran out of memory
};

Accuracy estimator_accuracy(const SweepData& sweep);

// (estimated peak - real peak) / real peak in percent: the estimate (whose
// overhead is the baseline) against what the process or device held.
double real_peak_error(const Estimate& e, const TrialResult& r);
// A trial's estimated peak against what it measured, (estimated - measured) /
// measured in percent: against the real peak where the trial has one (the
// estimate's overhead is the process's baseline and its slack, so that is what
// it predicts), else against the allocator's peak; nullopt without an estimate
// or a measured peak. The one rule for the reports' per-trial memory error.
std::optional<double> peak_error(const TrialResult& r);

ErrorSummary summarize(const std::vector<ErrorSample>& samples);

// "Median |step-time error|: 4.2% before calibration (n=37), 2.1% after (n=37)." for the
// reports; only the "after" part when no trial kept its uncalibrated estimate, "" when
// no trial has a step-time estimate. With speed references, a second sentence gives the
// same at each trial's machine speed and the range the machine's pace moved over.
std::string step_error_medians_text(const Accuracy& a);

// Fixed 10%-wide bins from -50% to +50% plus the two open tails.
std::vector<HistogramBin> error_histogram(const Accuracy& accuracy);

// The `n` samples with the largest absolute error, largest first.
std::vector<ErrorSample> worst(const std::vector<ErrorSample>& samples, std::size_t n);

}  // namespace tune
