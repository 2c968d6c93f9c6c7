// The CPU's level-2 cache as sysfs describes it, which the probes displace
// before timing an op (probe/probe_timing.h cache_displacer).
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <string>

#include <unistd.h>

#include "kernels/cpu/cpu_backend.h"
#include "kernels/cpu/cpu_cache.h"

using namespace tune::kernels;
namespace fs = std::filesystem;

namespace {

// One cache of a fake /sys/devices/system/cpu/cpuN.
void describe(const fs::path& cpu, int index, const std::string& level, const std::string& type,
              const std::string& size) {
    const fs::path dir = cpu / "cache" / ("index" + std::to_string(index));
    fs::create_directories(dir);
    std::ofstream(dir / "level") << level << "\n";
    std::ofstream(dir / "type") << type << "\n";
    std::ofstream(dir / "size") << size << "\n";
}

}  // namespace

TEST_CASE("sysfs cache sizes read in bytes", "[cpu][probe]") {
    CHECK(cpu::parse_cache_size("2048K") == 2u << 20);
    CHECK(cpu::parse_cache_size("1M") == 1u << 20);
    CHECK(cpu::parse_cache_size("32768") == 32768u);
    CHECK_FALSE(cpu::parse_cache_size(""));
    CHECK_FALSE(cpu::parse_cache_size("K"));
    CHECK_FALSE(cpu::parse_cache_size("12KB"));
}

TEST_CASE("the level-2 cache is the one whose level reads 2, instructions aside", "[cpu][probe]") {
    const fs::path cpu = fs::temp_directory_path() / ("tune_cpu_cache_" + std::to_string(::getpid()));
    fs::remove_all(cpu);
    describe(cpu, 0, "1", "Data", "48K");
    describe(cpu, 1, "1", "Instruction", "64K");
    CHECK(cpu::level2_cache_bytes(cpu) == 0);  // none described: the probes leave the caches alone
    describe(cpu, 2, "2", "Unified", "2048K");
    describe(cpu, 3, "3", "Unified", "491520K");
    CHECK(cpu::level2_cache_bytes(cpu) == 2u << 20);
    fs::remove_all(cpu);
    CHECK(cpu::level2_cache_bytes(cpu) == 0);  // no sysfs at all
}

TEST_CASE("the CPU backend reports cpu0's level-2 cache", "[cpu][probe]") {
    CHECK(CpuBackend{}.private_cache_bytes() == cpu::level2_cache_bytes());
}
