// Numbers as every report writes them: one function per kind of number, used
// by the HTML tables, the charts' tooltips, the terminal report and `tune
// best`/`tune list`, so they agree and scale with the number. A tiny model's
// 2.5 MiB peak and 1.2M parameters never read "0.00".
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "core/config.h"
#include "store/records.h"

namespace tune {

// Bytes in the largest IEC unit they reach: "512 B", "2.50 MiB", "38.73 GiB".
std::string bytes_text(std::uint64_t bytes);
// A count with K, M, B or T, three significant digits: "512", "1.20M", "6.74B".
std::string count_text(double n);
// Tokens per second, scaled like a count: "0.842", "84.2", "12.3K", "1.23M".
std::string throughput_text(double tokens_per_s);
// Seconds to three significant digits: "12.3", "0.412", "0.00123".
std::string seconds_text(double seconds);
std::string percent_text(double percent);  // "+12.3%"

// The unit a chart draws bytes in: the largest IEC unit the biggest value reaches,
// so the axis of a tiny model's peaks reads 0-3 MiB, not 0.000-0.003 GiB.
struct ByteUnit {
    std::string_view name;  // "MiB"
    double bytes = 1;       // bytes per unit
};
ByteUnit byte_unit_for(std::uint64_t largest_bytes);
inline double in_unit(std::uint64_t bytes, ByteUnit unit) { return static_cast<double>(bytes) / unit.bytes; }

// Tokens one optimizer step processes over all ranks.
std::uint64_t tokens_per_step(const TrialConfig& c);

// Measured seconds per optimizer step: the store's median over the steps after
// warmup, else derived from the measured throughput. nullopt when not measured.
std::optional<double> measured_step_s(const TrialRecord& t);

// The estimator's error for one quantity, in percent of the measured value.
double error_percent(double estimated, double measured);

// Whether percent_text shows `percent` as zero: an error below the report's precision.
bool shown_as_zero(double percent);

// The searched dimensions only (not seeds, learning rates or the memory limit),
// so the same point of two sweeps on different hardware can be matched.
std::string dimensions_key(const TrialConfig& c);

}  // namespace tune
