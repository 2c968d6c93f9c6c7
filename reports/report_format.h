// Numbers as every report section writes them, so the terminal, the HTML
// tables and the charts agree on units: memory in GiB, throughput in tokens/s,
// errors as signed percentages of the measured value.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "core/config.h"
#include "store/records.h"

namespace tune {

double to_gib(std::uint64_t bytes);
std::string gib_text(std::uint64_t bytes);           // "12.34"
std::string rate_text(double tokens_per_s);          // "12345"
std::string seconds_text(double seconds);            // "0.412"
std::string percent_text(double percent);            // "+12.3%"

// Tokens one optimizer step processes over all ranks.
std::uint64_t tokens_per_step(const TrialConfig& c);

// Measured seconds per optimizer step: the store's median over the steps after
// warmup, else derived from the measured throughput. nullopt when not measured.
std::optional<double> measured_step_s(const TrialRecord& t);

// The estimator's error for one quantity, in percent of the measured value.
double error_percent(double estimated, double measured);

// The searched dimensions only (not seeds, learning rates or the memory limit),
// so the same point of two sweeps on different hardware can be matched.
std::string dimensions_key(const TrialConfig& c);

}  // namespace tune
