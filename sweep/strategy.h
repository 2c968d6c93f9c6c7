// The order a sweep runs its trials in: `grid` keeps the enumeration order,
// `pareto-first` runs the predicted Pareto front first. Spelled as text only
// in sweep files, flags and output; compared as the enum everywhere else.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string_view>

#include "core/config.h"

namespace tune {

enum class SearchStrategy : std::uint8_t { grid, pareto_first };

inline constexpr std::array<SearchStrategy, 2> kSearchStrategies{SearchStrategy::grid, SearchStrategy::pareto_first};

inline constexpr std::string_view to_string(SearchStrategy s) {
    constexpr std::array<std::string_view, 2> names{"grid", "pareto-first"};
    return names[static_cast<std::size_t>(s)];
}
// Every name, in the enum's order, for readers that list the valid values.
inline constexpr std::array<std::string_view, 2> kSearchStrategyNames{to_string(SearchStrategy::grid),
                                                                      to_string(SearchStrategy::pareto_first)};
inline std::optional<SearchStrategy> parse_strategy(std::string_view t) { return parse_enum(t, kSearchStrategies); }

}  // namespace tune
