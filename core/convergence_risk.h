// Configurations that may train worse than their speed and memory suggest.
// Pure bf16 (precision "bf16") keeps weights, gradients and optimizer states in
// bf16 with no fp32 master copy: an update smaller than half of bf16's spacing
// (8 significant bits, about 0.4% of the weight) rounds away, so with small
// learning rates training can stall or diverge from the mixed-precision run.
// Every place that recommends a configuration (`tune best`, the report's panel
// and fronts, the exports) shows this beside it; the rule lives here once.
#pragma once

#include <optional>
#include <string_view>

#include "core/config.h"

namespace tune {

// A few words for a table cell: "convergence risk".
inline constexpr std::string_view kConvergenceRiskLabel = "convergence risk";

// The sentence that explains the risk of `c`, or nullopt when it has none.
std::optional<std::string_view> convergence_risk(const TrialConfig& c);

}  // namespace tune
