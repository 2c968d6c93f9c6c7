// Limits a sweep file must stay within before TOML++ sees it. The parser
// recurses on dotted keys and nested arrays, so a 100 KB file holding one
// 50,000-part table name exhausts the stack; a real sweep file is a few
// kilobytes with keys two or three parts deep.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace tune {

inline constexpr std::size_t kMaxSweepFileBytes = 1024 * 1024;
inline constexpr std::size_t kMaxTomlLineBytes = 16 * 1024;
inline constexpr int kMaxTomlDepth = 32;     // [ and { open at once, outside strings
inline constexpr int kMaxTomlKeyParts = 32;  // dotted key parts on one line, outside strings

// Throws a ConfigError located at the first line over a limit. A lexical scan only: strings
// and comments are skipped, everything else is left to the parser.
void check_toml_bounds(std::string_view text, const std::string& file);

}  // namespace tune
