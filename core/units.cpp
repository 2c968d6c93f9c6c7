#include "core/units.h"

#include <array>
#include <cctype>
#include <charconv>
#include <cmath>

#include <fmt/format.h>

#include "core/config_error.h"

namespace tune {
namespace {

std::string_view trim(std::string_view s) {
    while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
    while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
    return s;
}

// Splits "80.5 GiB" into 80.5 and "GiB". nullopt when there is no leading number.
std::optional<std::pair<double, std::string_view>> split_number(std::string_view text) {
    text = trim(text);
    double value = 0;
    auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (ec != std::errc() || !std::isfinite(value) || value < 0) return std::nullopt;
    return std::pair{value, trim(std::string_view(end, text.data() + text.size() - end))};
}

bool iequals(std::string_view a, std::string_view b) {
    if (a.size() != b.size()) return false;
    for (std::size_t i = 0; i < a.size(); ++i)
        if (std::tolower(static_cast<unsigned char>(a[i])) != std::tolower(static_cast<unsigned char>(b[i])))
            return false;
    return true;
}

}  // namespace

std::optional<std::uint64_t> parse_bytes(std::string_view text) {
    auto parsed = split_number(text);
    if (!parsed) return std::nullopt;
    auto [value, unit] = *parsed;
    struct Unit {
        std::string_view name;
        double scale;
    };
    static constexpr std::array<Unit, 10> units{{
        {"B", 1},
        {"KiB", 1024.0},
        {"MiB", 1048576.0},
        {"GiB", 1073741824.0},
        {"TiB", 1099511627776.0},
        {"KB", 1e3},
        {"MB", 1e6},
        {"GB", 1e9},
        {"TB", 1e12},
        {"K", 1024.0},
    }};
    for (const auto& u : units) {
        // Case matters only for the i in KiB; "gb" and "GB" mean the same thing to users.
        if (iequals(unit, u.name)) {
            double bytes = std::round(value * u.scale);
            if (bytes >= 1.8e19) return std::nullopt;
            return static_cast<std::uint64_t>(bytes);
        }
    }
    return std::nullopt;
}

std::string size_problem(std::string_view text) {
    const std::string_view t = trim(text);
    if (auto parsed = split_number(t); parsed && parsed->second.empty()) {
        const bool whole = t.find_first_not_of("0123456789") == std::string_view::npos;
        return whole ? fmt::format("{}: add a unit, e.g. {}GiB (or {}B for bytes)", t, t, t)
                     : fmt::format("{}: add a unit, e.g. {}GiB", t, t);
    }
    return fmt::format("'{}' is not a size; write e.g. 40GiB, 512MiB or 80GB", t);
}

std::uint64_t require_bytes(std::string_view text, std::string_view where) {
    if (auto bytes = parse_bytes(text)) return *bytes;
    throw ConfigError(fmt::format("{}: {}", where, size_problem(text)));
}

std::optional<double> parse_duration(std::string_view text) {
    auto parsed = split_number(text);
    if (!parsed) return std::nullopt;
    auto [value, unit] = *parsed;
    if (unit.empty() || unit == "s") return value;
    if (unit == "ms") return value / 1000.0;
    if (unit == "m" || unit == "min") return value * 60.0;
    if (unit == "h") return value * 3600.0;
    if (unit == "d") return value * 86400.0;
    return std::nullopt;
}

std::string format_bytes(std::uint64_t bytes) {
    static constexpr std::array<const char*, 5> names{"B", "KiB", "MiB", "GiB", "TiB"};
    if (bytes < 1024) return fmt::format("{} B", bytes);
    double value = static_cast<double>(bytes);
    std::size_t i = 0;
    while (value >= 1024.0 && i + 1 < names.size()) {
        value /= 1024.0;
        ++i;
    }
    return fmt::format("{:.2f} {}", value, names[i]);
}

std::string format_duration(double seconds) {
    if (!std::isfinite(seconds) || seconds < 0) return "?";
    if (seconds < 60) return fmt::format("{:.0f}s", seconds);
    auto total = static_cast<std::uint64_t>(std::llround(seconds));
    if (total < 3600) return fmt::format("{}m {:02}s", total / 60, total % 60);
    return fmt::format("{}h {:02}m", total / 3600, (total % 3600) / 60);
}

}  // namespace tune
