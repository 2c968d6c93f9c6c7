#include "harness/host_memory.h"

#include <charconv>
#include <fstream>
#include <sstream>
#include <string>

namespace tune::harness {

std::optional<std::uint64_t> mem_available_bytes(std::string_view meminfo) {
    // The line reads "MemAvailable:   12345678 kB" (proc(5)).
    constexpr std::string_view key = "MemAvailable:";
    const std::size_t at = meminfo.find(key);
    if (at == std::string_view::npos) return std::nullopt;
    std::string_view rest = meminfo.substr(at + key.size());
    const std::size_t digits = rest.find_first_not_of(' ');
    if (digits == std::string_view::npos) return std::nullopt;
    rest = rest.substr(digits);
    std::uint64_t kib = 0;
    const auto [end, error] = std::from_chars(rest.data(), rest.data() + rest.size(), kib);
    if (error != std::errc{} || !std::string_view(end, rest.data() + rest.size() - end).starts_with(" kB"))
        return std::nullopt;
    if (kib > (~std::uint64_t{0} >> 10)) return std::nullopt;
    return kib << 10;
}

std::optional<std::uint64_t> host_available_bytes() {
    std::ifstream in("/proc/meminfo");
    if (!in) return std::nullopt;
    std::ostringstream text;
    text << in.rdbuf();
    return mem_available_bytes(text.str());
}

}  // namespace tune::harness
