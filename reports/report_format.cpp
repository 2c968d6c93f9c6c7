#include "reports/report_format.h"

#include <fmt/format.h>

#include "core/dimensions.h"

#include "core/units.h"

namespace tune {

double to_gib(std::uint64_t bytes) { return static_cast<double>(bytes) / static_cast<double>(GiB); }

std::string gib_text(std::uint64_t bytes) { return fmt::format("{:.2f}", to_gib(bytes)); }

std::string rate_text(double tokens_per_s) { return fmt::format("{:.0f}", tokens_per_s); }

std::string seconds_text(double seconds) { return fmt::format("{:.3f}", seconds); }

std::string percent_text(double percent) { return fmt::format("{:+.1f}%", percent); }

std::uint64_t tokens_per_step(const TrialConfig& c) {
    return std::uint64_t{c.micro_batch} * c.context * c.grad_accum * c.world_size;
}

std::optional<double> measured_step_s(const TrialRecord& t) {
    if (!t.measured || t.result.status != TrialStatus::ok) return std::nullopt;
    if (t.median_step_s && *t.median_step_s > 0) return t.median_step_s;
    if (t.result.tokens_per_s > 0)
        return static_cast<double>(tokens_per_step(t.result.config)) / t.result.tokens_per_s;
    return std::nullopt;
}

double error_percent(double estimated, double measured) { return (estimated - measured) / measured * 100.0; }

std::string dimensions_key(const TrialConfig& c) {
    std::string key = c.model.name;
    for (const std::string& cell : dimension_cells(c)) key += "|" + cell;
    return key + "|" + std::to_string(c.world_size);
}

}  // namespace tune
