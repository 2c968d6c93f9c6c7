#include "kernels/cpu/cpu_cache.h"

#include <algorithm>
#include <charconv>
#include <fstream>
#include <string>

namespace tune::kernels::cpu {

namespace {

std::string first_word(const std::filesystem::path& file) {
    std::ifstream in(file);
    std::string word;
    in >> word;
    return word;
}

}  // namespace

std::optional<std::uint64_t> parse_cache_size(std::string_view text) {
    std::uint64_t value = 0;
    const char* end = text.data() + text.size();
    const auto [rest, error] = std::from_chars(text.data(), end, value);
    if (error != std::errc{} || rest == text.data()) return std::nullopt;
    const std::string_view unit(rest, static_cast<std::size_t>(end - rest));
    if (unit.empty()) return value;
    if (unit == "K") return value << 10;
    if (unit == "M") return value << 20;
    if (unit == "G") return value << 30;
    return std::nullopt;
}

std::uint64_t level2_cache_bytes(const std::filesystem::path& cpu) {
    std::error_code ec;
    std::uint64_t bytes = 0;
    for (const auto& index : std::filesystem::directory_iterator(cpu / "cache", ec)) {
        if (index.path().filename().string().rfind("index", 0) != 0) continue;
        if (first_word(index.path() / "level") != "2" || first_word(index.path() / "type") == "Instruction") continue;
        bytes = std::max(bytes, parse_cache_size(first_word(index.path() / "size")).value_or(0));
    }
    return bytes;
}

}  // namespace tune::kernels::cpu
