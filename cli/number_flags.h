// A flag's number held to the bounds of its sweep key (core/number_bounds.h), so
// `--margin nan` is refused (exit 2, naming the flag) as `margin = nan` is.
#pragma once

#include <charconv>
#include <string>

#include <CLI/CLI.hpp>

#include "core/number_bounds.h"

namespace tune {

inline CLI::Validator within(const NumberBounds& b) {
    CLI::Validator v(
        [b](std::string& text) -> std::string {
            double value = 0;
            const char* end = text.data() + text.size();
            const auto [at, error] = std::from_chars(text.data(), end, value);
            if (error != std::errc{} || at != end) return fmt::format("'{}' is not a number", text);
            return out_of_bounds(b, value).value_or(std::string());
        },
        fmt::format("NUMBER in [{}, {}]", b.min, b.max));
    return v;
}

}  // namespace tune
