// Byte sizes and durations as users write them: "80GiB", "80 GB", "10m", "8h".
// IEC (KiB, MiB, GiB, TiB) and SI (KB, MB, GB, TB) are both accepted and kept
// distinct: 80GB = 80e9 bytes, 80GiB = 80 * 2^30 bytes. Printing uses IEC.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace tune {

// Returns nullopt when the text is not a size; the caller owns the error message
// (size_problem writes it). A size has a unit: a bare "40" is refused, since
// nobody means 40 bytes, and "4096B" says bytes when bytes are meant.
std::optional<std::uint64_t> parse_bytes(std::string_view text);

// Why `text` is not a size, with the fix: "40: add a unit, e.g. 40GiB".
std::string size_problem(std::string_view text);

// parse_bytes, or a ConfigError "<where>: <size_problem>" (where: "--max-memory").
std::uint64_t require_bytes(std::string_view text, std::string_view where);

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
