#include "estimate/library_versions.h"

#include <array>
#include <charconv>

#include <fmt/format.h>

namespace tune {

std::optional<Version> parse_version(std::string_view text) {
    std::array<int, 3> parts{};
    std::size_t count = 0;
    const char* at = text.data();
    const char* end = text.data() + text.size();
    while (count < parts.size()) {
        const auto [next, error] = std::from_chars(at, end, parts[count]);
        if (error != std::errc{} || parts[count] < 0) return std::nullopt;
        ++count;
        at = next;
        if (at == end) return Version{parts[0], parts[1], parts[2]};
        if (*at != '.') return std::nullopt;
        ++at;
    }
    return std::nullopt;  // a fourth part, or a trailing dot
}

std::string to_string(const Version& v) { return fmt::format("{}.{}.{}", v.major, v.minor, v.patch); }

}  // namespace tune
