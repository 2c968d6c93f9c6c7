// What each searched dimension does on its own: per value of a dimension, how
// many trials ran, how they ended, and the best throughput and smallest peak
// among those that finished; and the throughput and memory curves over context
// length, one curve per value of a dimension (optimizer, activation recompute).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/dimensions.h"
#include "reports/sweep_data.h"

namespace tune {

struct DimensionValue {
    std::string value;
    std::size_t trials = 0;
    std::size_t ok = 0;
    std::size_t oom = 0;
    std::optional<double> best_tokens_per_s;  // among ok trials
    std::optional<std::uint64_t> min_peak;    // among ok trials
};

struct DimensionEffect {
    std::string dimension;               // "optimizer", "context", ...
    std::vector<DimensionValue> values;  // enum order, or ascending numbers
};

// One per search dimension (the dimension table's rows) plus the world size.
// Pruned and invalid trials count in `trials` only.
std::vector<DimensionEffect> dimension_effects(const SweepData& sweep);

struct ContextCurve {
    std::string label;                                     // "full", "adamw", ...
    std::vector<std::optional<double>> best_tokens_per_s;  // per context; nullopt where nothing finished
    std::vector<std::optional<std::uint64_t>> min_peak;
};

struct ContextEffect {
    std::string grouped_by;               // a dimension's name, e.g. "optimizer"
    std::vector<std::uint32_t> contexts;  // ascending
    std::vector<ContextCurve> curves;     // only groups present in the sweep
};

// One curve per value of `group` (a dimension whose table row asks for curves over context).
ContextEffect context_effect(const SweepData& sweep, const Dimension& group);

}  // namespace tune
