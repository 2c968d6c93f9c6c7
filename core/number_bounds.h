// The range a number the user gives may take: one rule for its sweep-file key
// and for its flag, so a value the sweep refuses the command line refuses too.
// NaN and infinity lie outside every range.
#pragma once

#include <array>
#include <cmath>
#include <optional>
#include <string>
#include <string_view>

#include <fmt/format.h>

namespace tune {

struct NumberBounds {
    std::string_view section;  // the sweep file's [section]
    std::string_view key;      // its key there
    std::string_view flag;     // the flag that takes the same number
    double min = 0;
    double max = 0;
};

namespace bounds {
inline constexpr NumberBounds margin{"hardware", "margin", "--margin", 0.0, 0.5};
inline constexpr NumberBounds host_margin{"hardware", "host_margin", "--host-margin", 0.0, 0.9};
inline constexpr NumberBounds max_cv{"trial", "max_cv", "--max-cv", 0.0, 10.0};
inline constexpr NumberBounds lora_dropout{"framework", "lora_dropout", "--lora-dropout", 0.0, 0.99};
inline constexpr NumberBounds lr{"trial", "lr", "--lr", 0.0, 10.0};
inline constexpr NumberBounds weight_decay{"trial", "weight_decay", "--weight-decay", 0.0, 10.0};
inline constexpr NumberBounds clip{"trial", "clip", "--clip", 0.0, 1e6};
inline constexpr NumberBounds neftune_alpha{"trial", "neftune_alpha", "--neftune-alpha", 0.0, 1000.0};
inline constexpr NumberBounds beta1{"trial", "beta1", "--beta1", 0.0, 0.999999};
inline constexpr NumberBounds beta2{"trial", "beta2", "--beta2", 0.0, 0.999999};
inline constexpr NumberBounds eps{"trial", "eps", "--eps", 1e-30, 1.0};
inline constexpr NumberBounds lora_alpha{"trial", "lora_alpha", "--lora-alpha", 1e-6, 1e6};
}  // namespace bounds

inline constexpr std::array kNumberBounds{bounds::margin, bounds::host_margin,  bounds::max_cv, bounds::lora_dropout,
                                          bounds::lr,     bounds::weight_decay, bounds::clip,   bounds::neftune_alpha,
                                          bounds::beta1,  bounds::beta2,        bounds::eps,    bounds::lora_alpha};

// Why `v` lies outside `b` ("nan is out of range (0 to 0.5)"), or nullopt; the caller names the key or flag.
inline std::optional<std::string> out_of_bounds(const NumberBounds& b, double v) {
    if (std::isfinite(v) && v >= b.min && v <= b.max) return std::nullopt;
    return fmt::format("{} is out of range ({} to {})", v, b.min, b.max);
}

}  // namespace tune
