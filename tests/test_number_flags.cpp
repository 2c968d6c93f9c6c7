// A number a flag takes goes through the bounds of its sweep key (core/number_bounds.h): NaN,
// infinity and values outside the range are bad input (exit 2) naming the flag, as in a sweep file.
#include <catch2/catch.hpp>

#include <string>

#include "core/number_bounds.h"
#include "tests/support/run_command.h"

using namespace tune;

namespace {

// The command whose flag it is: the estimator's memory knobs, else a trial's.
std::string command_for(const NumberBounds& b) {
    const bool estimate = b.section == "hardware" || b.section == "framework";
    return estimate ? "estimate --model tiny --device cpu" : "trial --model tiny --backend cpu --steps 2";
}

}  // namespace

TEST_CASE("every bounded flag refuses nan, infinity and a value past its sweep key's range, naming the flag") {
    for (const NumberBounds& b : kNumberBounds) {
        for (const std::string& bad : {std::string("nan"), std::string("inf"), std::string("-inf"),
                                       fmt::format("{}", b.max * 2 + 1), fmt::format("{}", b.min - 1)}) {
            const std::string args = command_for(b) + " " + std::string(b.flag) + " " + bad;
            INFO(args);
            const test::CommandResult r = test::run_tune(args);
            CHECK(r.exit_code == 2);
            CHECK_THAT(r.output, Catch::Contains(std::string(b.flag)));
        }
    }
    // The sweep file's bound and the flag's are one: a value inside is taken by both.
    CHECK(out_of_bounds(bounds::margin, 0.5) == std::nullopt);
    CHECK(out_of_bounds(bounds::margin, 0.51).has_value());
    CHECK(*out_of_bounds(bounds::margin, std::nan("")) == "nan is out of range (0 to 0.5)");
}

TEST_CASE("a bounded flag inside its range is taken") {
    const test::CommandResult r =
        test::run_tune("estimate --model tiny --device cpu --context 128 --margin 0.25 --host-margin 0.5");
    CHECK(r.exit_code == 0);
    CHECK_THAT(r.output, Catch::Contains("25% margin"));
}
