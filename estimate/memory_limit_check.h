// A memory limit above the device's own memory cannot be reached: a trial runs
// out of device memory before the allocator's limit, and the estimator would
// call configurations "fitting" that cannot. Said as a warning, not refused,
// since the device preset may be a guess.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "core/config.h"

namespace tune {

// The warning text, or nullopt when `limit` is within the GPU's memory (or the device is not a GPU).
std::optional<std::string> limit_above_device(std::uint64_t limit, const Hardware& hw);

}  // namespace tune
