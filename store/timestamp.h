// Wall-clock instants as the store keeps them: UTC, millisecond resolution,
// written as ISO 8601 text ("2026-11-22T02:30:34.123Z") so they sort and read well.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <string_view>

namespace tune {

using Timestamp = std::chrono::sys_time<std::chrono::milliseconds>;

Timestamp now_timestamp();
std::string format_timestamp(Timestamp t);
std::optional<Timestamp> parse_timestamp(std::string_view text);

}  // namespace tune
