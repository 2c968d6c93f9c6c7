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

namespace {

// PyYAML reads a float only with a '.' in its mantissa (YAML 1.1): JSON's 1e-08 would be the string "1e-08".
std::string yaml_scalar(const nlohmann::json& scalar) {
    std::string text = scalar.dump(-1, ' ', true);
    if (!scalar.is_number_float()) return text;
    const std::size_t e = text.find_first_of("eE");
    if (e != std::string::npos && text.find('.') == std::string::npos) text.insert(e, ".0");
    return text;
}

// Lists (LitGPT's betas) in flow form, each element written as a scalar.
std::string yaml_value(const nlohmann::json& value) {
    if (!value.is_array()) return yaml_scalar(value);
    std::string out = "[";
    for (std::size_t i = 0; i < value.size(); ++i) out += (i ? ", " : "") + yaml_value(value[i]);
    return out + "]";
}

}  // namespace

void YamlText::key(std::string_view name, const nlohmann::json& scalar) {
    text_ += fmt::format("{}{}: {}\n", indent_, name, yaml_value(scalar));
}

void YamlText::section(std::string_view name) {
    text_ += fmt::format("{}{}:\n", indent_, name);
    indent_ += "  ";
}

void YamlText::end_section() {
    if (indent_.size() >= 2) indent_.resize(indent_.size() - 2);
}

}  // namespace tune
