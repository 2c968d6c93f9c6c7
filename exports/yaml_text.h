// YAML as the exports write it: `key: value` lines, nested by two spaces
// under a section, and `#` comments. Every scalar is written in its JSON form
// (strings double-quoted), which YAML 1.2 and PyYAML read back as the same
// value: an unquoted `no` reads as false, and accelerate then calls .lower()
// on it. No value can open a line or a key of its own.
#pragma once

#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace tune {

// `text` on one line: every control character (a line break ends a comment
// early, and what follows would be read as YAML or run as shell) as \xNN.
std::string one_line(std::string_view text);

class YamlText {
public:
    void comment(std::string_view text);
    void key(std::string_view name, const nlohmann::json& scalar);
    // The keys that follow nest under `name` (inside the open section, if any) until end_section().
    void section(std::string_view name);
    void end_section();
    const std::string& text() const { return text_; }

private:
    std::string text_;
    std::string indent_;
};

}  // namespace tune
