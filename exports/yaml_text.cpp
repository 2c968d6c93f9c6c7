#include "exports/yaml_text.h"

#include <fmt/format.h>

namespace tune {

std::string one_line(std::string_view text) {
    std::string out;
    for (char ch : text) {
        const auto byte = static_cast<unsigned char>(ch);
        if (byte < 0x20 || byte == 0x7f)
            out += fmt::format("\\x{:02x}", byte);
        else
            out += ch;
    }
    return out;
}

void YamlText::comment(std::string_view text) { text_ += fmt::format("{}# {}\n", indent_, one_line(text)); }

void YamlText::key(std::string_view name, const nlohmann::json& scalar) {
    text_ += fmt::format("{}{}: {}\n", indent_, name, scalar.dump(-1, ' ', true));
}

void YamlText::section(std::string_view name) {
    text_ += fmt::format("{}:\n", name);
    indent_ = "  ";
}

}  // namespace tune
