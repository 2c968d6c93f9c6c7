// The search dimensions as command-line flags, one per row of the dimension
// table (--optimizer, --precision, --zero, ...), for every command that takes
// a configuration (trial, estimate) or filters by one (best).
#pragma once

#include <array>
#include <string>
#include <utility>
#include <vector>

#include <CLI/CLI.hpp>

#include "core/config.h"
#include "core/dimensions.h"

namespace tune::cli {

struct DimensionFlags {
    std::array<std::string, kDimensionCount> text;
    std::array<CLI::Option*, kDimensionCount> options{};

    // Every dimension given on the command line, parsed; throws ConfigError naming
    // the flag, the value and what it may be.
    std::vector<std::pair<std::size_t, DimValue>> given() const;
    // Sets the given dimensions on `c`; the others keep c's values.
    void apply(TrialConfig& c) const;
};

// `defaults` fills the help's "[default]" text; nullptr for filters (no default).
void add_dimension_flags(CLI::App* cmd, DimensionFlags& flags, const TrialConfig* defaults,
                         std::string_view help_prefix = "");

}  // namespace tune::cli
