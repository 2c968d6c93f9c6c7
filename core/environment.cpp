#include "core/environment.h"

#include <charconv>
#include <cmath>
#include <cstdlib>
#include <string_view>

#include <fmt/format.h>

#include "core/config_error.h"

namespace tune {
namespace {

std::optional<std::string_view> value_of(const char* name) {
    const char* value = std::getenv(name);
    if (value == nullptr || *value == '\0') return std::nullopt;
    return std::string_view(value);
}

[[noreturn]] void refuse(const char* name, std::string_view value, std::string_view wanted) {
    throw ConfigError(fmt::format("environment variable {} is \"{}\": {}", name, value, wanted));
}

}  // namespace

std::optional<std::int64_t> environment_integer(const char* name, std::int64_t min, std::int64_t max) {
    const auto text = value_of(name);
    if (!text) return std::nullopt;
    std::int64_t v = 0;
    const auto [at, error] = std::from_chars(text->data(), text->data() + text->size(), v);
    if (error != std::errc{} || at != text->data() + text->size() || v < min || v > max)
        refuse(name, *text, fmt::format("expected a whole number from {} to {}", min, max));
    return v;
}

std::optional<double> environment_number(const char* name, double min, double max) {
    const auto text = value_of(name);
    if (!text) return std::nullopt;
    double v = 0;
    const auto [at, error] = std::from_chars(text->data(), text->data() + text->size(), v);
    if (error != std::errc{} || at != text->data() + text->size() || !std::isfinite(v) || v < min || v > max)
        refuse(name, *text, fmt::format("expected a number from {} to {}", min, max));
    return v;
}

}  // namespace tune
