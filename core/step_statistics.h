// Timing noise of a trial's steps, as Google Benchmark reports repetitions:
// mean, median, sample standard deviation and coefficient of variation
// (stddev / mean) over the timed steps (warm-up excluded).
#pragma once

#include <cstddef>
#include <vector>

#include <nlohmann/json.hpp>

namespace tune {

struct StepStatistics {
    std::size_t count = 0;  // timed steps
    double mean_ms = 0;
    double median_ms = 0;
    double stddev_ms = 0;  // sample (n - 1); 0 for fewer than two steps
    double cv = 0;         // stddev / mean; 0 when the mean is 0
    bool operator==(const StepStatistics&) const = default;
};

// The median of the finite values (the mean of the middle two for an even
// count); 0 for none.
double median_of(std::vector<double> values);

// Over step_ms[warmup:]; non-finite times are skipped.
StepStatistics step_statistics(const std::vector<double>& step_ms, std::size_t warmup);

void to_json(nlohmann::json& j, const StepStatistics& s);
void from_json(const nlohmann::json& j, StepStatistics& s);

}  // namespace tune
