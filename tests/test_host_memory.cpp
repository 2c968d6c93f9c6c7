// A CPU trial's default memory limit: the machine's MemAvailable.
#include <catch2/catch.hpp>

#include "train/memory/host_memory.h"

using namespace tune::train;

TEST_CASE("MemAvailable is read from /proc/meminfo's text in bytes", "[memory]") {
    const char* text = "MemTotal:       16318412 kB\nMemFree:         1234 kB\nMemAvailable:    8000000 kB\n";
    CHECK(mem_available_bytes(text) == std::uint64_t{8000000} * 1024);
    CHECK_FALSE(mem_available_bytes("MemTotal: 1 kB\n"));
    CHECK_FALSE(mem_available_bytes("MemAvailable: lots\n"));
    CHECK_FALSE(mem_available_bytes("MemAvailable: 99999999999999999999 kB\n"));
}

TEST_CASE("this machine reports what it can give", "[memory]") {
    const auto bytes = host_available_bytes();
    REQUIRE(bytes);
    CHECK(*bytes > 0);
}
