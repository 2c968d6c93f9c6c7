// The predicted Pareto front: the configurations the estimator says fit, the
// fastest for their memory. One selection and one table for every place that
// shows it (`tune estimate FILE`, the sweep's terminal output, `tune report`),
// so they always print the same front, labelled "predicted".
#pragma once

#include <cstddef>
#include <span>
#include <string>
#include <vector>

#include "core/config.h"
#include "store/records.h"

namespace tune {

// One estimated configuration; `trial` is 0 when it is not in a database. Under a sweep's
// [framework], `framework` is that stack's prediction (null where the row has none), and
// the front is that stack's: its device memory against its tokens/s.
struct PredictedRow {
    const TrialConfig* config = nullptr;
    const Estimate* estimate = nullptr;
    TrialId trial = 0;
    const FrameworkPrediction* framework = nullptr;
    std::string framework_name;  // empty: our engine answers
};

// Indices of the rows on the front, by increasing predicted peak. Only
// estimates that fit take part (core/pareto's predicted_point); under a
// framework, only rows that stack can run and whose device memory fits.
std::vector<std::size_t> predicted_front(std::span<const PredictedRow> rows);

// A stored trial's row, with its sweep's framework's prediction when the sweep names one.
PredictedRow predicted_row(const TrialRecord& t);

// The rows of stored trials the estimator speaks for: not measured yet
// (pending or running) and estimated, with the sweep's framework's prediction.
std::vector<PredictedRow> predicted_rows(std::span<const TrialRecord> trials);

// "Predicted Pareto front (...)" and its table, or a sentence when it is empty.
std::string predicted_front_text(std::span<const PredictedRow> rows, std::span<const std::size_t> front,
                                 const std::string& indent = "  ");

}  // namespace tune
