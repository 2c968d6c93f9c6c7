#include "estimate/memory_limit_check.h"

#include <fmt/format.h>

#include "core/units.h"

namespace tune {

std::optional<std::string> limit_above_device(std::uint64_t limit, const Hardware& hw) {
    if (hw.backend != BackendKind::cuda || hw.memory_bytes == 0 || limit <= hw.memory_bytes) return std::nullopt;
    return fmt::format(
        "the memory limit {} is above the {} device's own {}: trials run out of device memory "
        "first, and estimates against the limit are too optimistic",
        format_bytes(limit), hw.device, format_bytes(hw.memory_bytes));
}

}  // namespace tune
