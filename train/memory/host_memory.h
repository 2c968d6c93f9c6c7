// What this machine can give a CPU trial: the kernel's MemAvailable. A CPU
// trial has no device memory to run out of, so without a limit it would
// allocate until the machine swaps or the OOM killer ends something else.
// And what this process holds: its resident set now (VmRSS) and at most
// (VmHWM), which a CPU trial reports beside the tagged peak.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace tune::train {

// MemAvailable from the text of /proc/meminfo, in bytes; nullopt when absent or unreadable.
std::optional<std::uint64_t> mem_available_bytes(std::string_view meminfo);
// The same for this machine now.
std::optional<std::uint64_t> host_available_bytes();
// MemTotal: this machine's memory, in bytes; nullopt where /proc is not readable.
std::optional<std::uint64_t> host_total_bytes();

// A "Key:   12345 kB" line of a /proc file (meminfo, status), in bytes.
std::optional<std::uint64_t> proc_kib_field(std::string_view text, std::string_view key);

struct ProcessMemory {
    std::uint64_t rss = 0;  // VmRSS: resident now
    std::uint64_t hwm = 0;  // VmHWM: the most resident since start or the last reset_peak_rss()
};
// VmRSS and VmHWM from the text of /proc/<pid>/status; nullopt when either is missing.
std::optional<ProcessMemory> process_memory(std::string_view status);
// The same for this process now; nullopt where /proc is not readable.
std::optional<ProcessMemory> this_process_memory();
// Restarts VmHWM at the current resident set (writes 5 to /proc/self/clear_refs,
// Linux 4.0+); false where the kernel refuses.
bool reset_peak_rss();

}  // namespace tune::train
