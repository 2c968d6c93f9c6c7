#include "train/memory/host_memory.h"

#include <charconv>
#include <fstream>
#include <sstream>
#include <string>

namespace tune::train {

namespace {

std::optional<std::string> read_proc(const char* path) {
    std::ifstream in(path);
    if (!in) return std::nullopt;
    std::ostringstream text;
    text << in.rdbuf();
    return text.str();
}

}  // namespace

std::optional<std::uint64_t> proc_kib_field(std::string_view text, std::string_view key) {
    // The line reads "MemAvailable:   12345678 kB" (proc(5)); the key starts a line.
    std::size_t at = text.find(key);
    while (at != std::string_view::npos && at > 0 && text[at - 1] != '\n') at = text.find(key, at + 1);
    if (at == std::string_view::npos) return std::nullopt;
    std::string_view rest = text.substr(at + key.size());
    if (!rest.starts_with(':')) return std::nullopt;
    rest.remove_prefix(1);
    const std::size_t digits = rest.find_first_not_of(" \t");
    if (digits == std::string_view::npos) return std::nullopt;
    rest = rest.substr(digits);
    std::uint64_t kib = 0;
    const auto [end, error] = std::from_chars(rest.data(), rest.data() + rest.size(), kib);
    if (error != std::errc{} || !std::string_view(end, rest.data() + rest.size() - end).starts_with(" kB"))
        return std::nullopt;
    if (kib > (~std::uint64_t{0} >> 10)) return std::nullopt;
    return kib << 10;
}

std::optional<std::uint64_t> mem_available_bytes(std::string_view meminfo) {
    return proc_kib_field(meminfo, "MemAvailable");
}

std::optional<std::uint64_t> host_available_bytes() {
    const std::optional<std::string> text = read_proc("/proc/meminfo");
    return text ? mem_available_bytes(*text) : std::nullopt;
}

std::optional<std::uint64_t> host_total_bytes() {
    const std::optional<std::string> text = read_proc("/proc/meminfo");
    return text ? proc_kib_field(*text, "MemTotal") : std::nullopt;
}

std::optional<ProcessMemory> process_memory(std::string_view status) {
    const std::optional<std::uint64_t> rss = proc_kib_field(status, "VmRSS");
    const std::optional<std::uint64_t> hwm = proc_kib_field(status, "VmHWM");
    if (!rss || !hwm) return std::nullopt;
    return ProcessMemory{*rss, *hwm};
}

std::optional<ProcessMemory> this_process_memory() {
    const std::optional<std::string> text = read_proc("/proc/self/status");
    return text ? process_memory(*text) : std::nullopt;
}

bool reset_peak_rss() {
    std::ofstream out("/proc/self/clear_refs");
    out << "5";
    out.flush();
    return static_cast<bool>(out);
}

}  // namespace tune::train
