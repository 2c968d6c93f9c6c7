// The terminal report (`tune report --format text`): per sweep, the funnel,
// the Pareto front and the estimator's error summary as aligned tables; for
// several sweeps, each against the first as well.
#pragma once

#include <span>
#include <string>

#include "reports/sweep_data.h"

namespace tune {

class Store;

std::string render_text_report(std::span<const SweepData> sweeps);

// Loads the named sweeps (the latest one when `sweeps` is empty) and renders them.
std::string text_report(const Store& store, std::span<const std::string> sweeps);

}  // namespace tune
