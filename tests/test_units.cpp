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
    CHECK(parse_bytes("512B") == 512ull);
}

TEST_CASE("sizes that are not sizes are rejected", "[units]") {
    CHECK_FALSE(parse_bytes("80 potatoes"));
    CHECK_FALSE(parse_bytes(""));
    CHECK_FALSE(parse_bytes("GiB"));
    CHECK_FALSE(parse_bytes("-5GiB"));
    CHECK_FALSE(parse_bytes("1e30 TiB"));
}

TEST_CASE("a bare number is not a size: the error says to add a unit", "[units]") {
    CHECK_FALSE(parse_bytes("4096"));
    CHECK_FALSE(parse_bytes("2.2"));
    CHECK(size_problem("40") == "40: add a unit, e.g. 40GiB (or 40B for bytes)");
    CHECK(size_problem("lots") == "'lots' is not a size; write e.g. 40GiB, 512MiB or 80GB");
    CHECK(require_bytes("40GiB", "--max-memory") == 40 * GiB);
    CHECK_THROWS_WITH(require_bytes("2.2", "--max-memory"),
                      Catch::Contains("--max-memory: 2.2: add a unit, e.g. 2.2GiB"));
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
