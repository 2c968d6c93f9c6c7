// "Did you mean ...?" for misspelt keys and values.
#pragma once

#include <optional>
#include <span>
#include <string>
#include <string_view>

namespace tune {

// Edit distance (insertions, deletions, substitutions), case-insensitive.
std::size_t edit_distance(std::string_view a, std::string_view b);

// The candidate closest to `word`, when it is close enough to be a plausible
// typo (at most a third of the word's length, and at least 2, edits away).
std::optional<std::string> nearest(std::string_view word, std::span<const std::string_view> candidates);

}  // namespace tune
