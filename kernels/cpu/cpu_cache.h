// The CPU's caches as Linux describes them (/sys/devices/system/cpu/cpuN/cache):
// the probes displace a core's level-2 cache before timing an op, so the op
// meets the caches as a step's earlier ops leave them (probe/probe_timing.h).
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string_view>

namespace tune::kernels::cpu {

// sysfs's size text, "2048K", "1M" or bytes, in bytes; nullopt when malformed.
std::optional<std::uint64_t> parse_cache_size(std::string_view text);

// Bytes of the level-2 cache of the CPU whose sysfs directory is `cpu`
// (every index*/ whose `level` reads 2: unified, or data); 0 when none is described.
std::uint64_t level2_cache_bytes(const std::filesystem::path& cpu = "/sys/devices/system/cpu/cpu0");

}  // namespace tune::kernels::cpu
