#include "reports/report_format.h"

#include <array>
#include <cmath>
#include <utility>

#include <fmt/format.h>

#include "core/dimensions.h"
#include "core/parallel_plan.h"
#include "core/units.h"

namespace tune {
namespace {

// Three significant digits, without an exponent. The thresholds sit where
// rounding would add a digit (99.96 is "100", not "100.0").
std::string three_digits(double v) {
    const double a = std::fabs(v);
    if (a >= 99.95) return fmt::format("{:.0f}", v);
    if (a >= 9.995) return fmt::format("{:.1f}", v);
    if (a >= 0.9995 || a == 0) return fmt::format("{:.2f}", v);
    return fmt::format("{:.3g}", v);
}

// The suffix that keeps the number below 1000 after rounding to three digits.
std::string scaled(double v) {
    if (!std::isfinite(v)) return "-";
    static constexpr std::array<std::pair<double, const char*>, 4> kScales{
        {{1e12, "T"}, {1e9, "B"}, {1e6, "M"}, {1e3, "K"}}};
    for (const auto& [scale, suffix] : kScales)
        if (std::fabs(v) >= scale * 0.9995) return three_digits(v / scale) + suffix;
    return three_digits(v);
}

}  // namespace

std::string bytes_text(std::uint64_t bytes) { return format_bytes(bytes); }

std::string count_text(double n) {
    if (std::fabs(n) < 999.5 && n == std::round(n)) return fmt::format("{:.0f}", n);
    return scaled(n);
}

std::string throughput_text(double tokens_per_s) { return scaled(tokens_per_s); }

std::string seconds_text(double seconds) { return std::isfinite(seconds) ? three_digits(seconds) : "-"; }

std::string percent_text(double percent) { return fmt::format("{:+.1f}%", percent); }

bool shown_as_zero(double percent) { return std::fabs(percent) < 0.05; }

ByteUnit byte_unit_for(std::uint64_t largest_bytes) {
    static constexpr std::array<ByteUnit, 5> kUnits{{{"TiB", static_cast<double>(1024 * GiB)},
                                                     {"GiB", static_cast<double>(GiB)},
                                                     {"MiB", static_cast<double>(MiB)},
                                                     {"KiB", static_cast<double>(KiB)},
                                                     {"B", 1.0}}};
    for (const ByteUnit& u : kUnits)
        if (static_cast<double>(largest_bytes) >= u.bytes) return u;
    return kUnits.back();
}

std::uint64_t tokens_per_step(const TrialConfig& c) {
    return std::uint64_t{c.micro_batch} * c.context * c.grad_accum * parallel_plan(c).world();
}

std::optional<double> measured_step_s(const TrialRecord& t) {
    if (!t.measured || t.result.status != TrialStatus::ok) return std::nullopt;
    if (t.median_step_s && *t.median_step_s > 0) return t.median_step_s;
    if (t.result.tokens_per_s > 0) return static_cast<double>(tokens_per_step(t.result.config)) / t.result.tokens_per_s;
    return std::nullopt;
}

double error_percent(double estimated, double measured) { return (estimated - measured) / measured * 100.0; }

std::string dimensions_key(const TrialConfig& c) {
    std::string key = c.model.name;
    for (const std::string& cell : dimension_cells(c)) key += "|" + cell;
    return key + "|" + std::to_string(parallel_plan(c).world());
}

}  // namespace tune
