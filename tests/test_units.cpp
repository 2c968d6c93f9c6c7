#include <catch2/catch.hpp>

#include "core/units.h"

using namespace tune;

TEST_CASE("sizes parse in IEC and SI units, with or without a space", "[units]") {
    CHECK(parse_bytes("80GiB") == 80ull * GiB);
    CHECK(parse_bytes("80 GiB") == 80ull * GiB);
    CHECK(parse_bytes("80GB") == 80'000'000'000ull);
    CHECK(parse_bytes("80gb") == 80'000'000'000ull);
    CHECK(parse_bytes("64MiB") == 64ull * MiB);
    CHECK(parse_bytes("1.5 KiB") == 1536ull);
    CHECK(parse_bytes("4096") == 4096ull);
    CHECK(parse_bytes("512B") == 512ull);
}

TEST_CASE("sizes that are not sizes are rejected", "[units]") {
    CHECK_FALSE(parse_bytes("80 potatoes"));
    CHECK_FALSE(parse_bytes(""));
    CHECK_FALSE(parse_bytes("GiB"));
    CHECK_FALSE(parse_bytes("-5GiB"));
    CHECK_FALSE(parse_bytes("1e30 TiB"));
}

TEST_CASE("durations parse with s, m, h and d", "[units]") {
    CHECK(parse_duration("10m") == Approx(600));
    CHECK(parse_duration("8h") == Approx(28800));
    CHECK(parse_duration("90") == Approx(90));
    CHECK(parse_duration("1.5h") == Approx(5400));
    CHECK_FALSE(parse_duration("10 parsecs"));
}

TEST_CASE("sizes and durations format for humans", "[units]") {
    CHECK(format_bytes(512) == "512 B");
    CHECK(format_bytes(80ull * GiB) == "80.00 GiB");
    CHECK(format_bytes(3 * MiB) == "3.00 MiB");
    CHECK(format_duration(45) == "45s");
    CHECK(format_duration(723) == "12m 03s");
    CHECK(format_duration(7500) == "2h 05m");
}
