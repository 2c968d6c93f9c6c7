// Numbers from the environment, read one way: strictly. An unset or empty
// variable is absent; anything else must be a whole number (or a number) in
// range, else a ConfigError (exit 2) naming the variable and what it holds, so
// a typo such as OMP_NUM_THREADS=4x is never read as 4 or as unset.
#pragma once

#include <cstdint>
#include <optional>

namespace tune {

std::optional<std::int64_t> environment_integer(const char* name, std::int64_t min, std::int64_t max);
std::optional<double> environment_number(const char* name, double min, double max);

}  // namespace tune
