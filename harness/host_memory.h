// What this machine can give a CPU trial: the kernel's MemAvailable. A CPU
// trial has no device memory to run out of, so without a limit it would
// allocate until the machine swaps or the OOM killer ends something else.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace tune::harness {

// MemAvailable from the text of /proc/meminfo, in bytes; nullopt when absent or unreadable.
std::optional<std::uint64_t> mem_available_bytes(std::string_view meminfo);
// The same for this machine now.
std::optional<std::uint64_t> host_available_bytes();

}  // namespace tune::harness
