// Byte sizes and durations as users write them: "80GiB", "80 GB", "10m", "8h".
// IEC (KiB, MiB, GiB, TiB) and SI (KB, MB, GB, TB) are both accepted and kept
// distinct: 80GB = 80e9 bytes, 80GiB = 80 * 2^30 bytes. Printing uses IEC.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace tune {

// Returns nullopt when the text is not a size; the caller owns the error message.
std::optional<std::uint64_t> parse_bytes(std::string_view text);

// Seconds from "90", "90s", "10m", "1.5h", "2d". nullopt when not a duration.
std::optional<double> parse_duration(std::string_view text);

// "12.55 GiB", "512 B", "3.00 MiB".
std::string format_bytes(std::uint64_t bytes);

// "45s", "12m 03s", "2h 05m".
std::string format_duration(double seconds);

inline constexpr std::uint64_t KiB = 1024ull;
inline constexpr std::uint64_t MiB = 1024ull * KiB;
inline constexpr std::uint64_t GiB = 1024ull * MiB;

}  // namespace tune
