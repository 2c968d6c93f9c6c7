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

// One estimated configuration; `trial` is 0 when it is not in a database.
struct PredictedRow {
    const TrialConfig* config = nullptr;
    const Estimate* estimate = nullptr;
    TrialId trial = 0;
};

// Indices of the rows on the front, by increasing predicted peak. Only
// estimates that fit take part (core/pareto's predicted_point).
std::vector<std::size_t> predicted_front(std::span<const PredictedRow> rows);

// The rows of stored trials the estimator speaks for: not measured yet
// (pending or running) and estimated.
std::vector<PredictedRow> predicted_rows(std::span<const TrialRecord> trials);

// "Predicted Pareto front (...)" and its table, or a sentence when it is empty.
std::string predicted_front_text(std::span<const PredictedRow> rows, std::span<const std::size_t> front,
                                 const std::string& indent = "  ");

}  // namespace tune
