#include "cli/dimension_flags.h"

#include <fmt/format.h>

#include "core/config_error.h"
#include "core/nearest.h"

namespace tune::cli {

std::vector<std::pair<std::size_t, DimValue>> DimensionFlags::given() const {
    std::vector<std::pair<std::size_t, DimValue>> out;
    for (std::size_t i = 0; i < kDimensionCount; ++i) {
        if (options[i] == nullptr || options[i]->count() == 0) continue;
        const Dimension& d = dimensions()[i];
        const auto value = d.parse(text[i]);
        if (!value) {
            std::string hint;
            if (d.is_enum())
                if (auto guess = nearest(text[i], d.choices)) hint = fmt::format("; did you mean '{}'?", *guess);
            throw ConfigError(fmt::format("{} '{}': expected {}{}", d.flag, text[i], d.allowed(), hint));
        }
        out.emplace_back(i, *value);
    }
    return out;
}

void DimensionFlags::apply(TrialConfig& c) const {
    for (const auto& [index, value] : given()) dimensions()[index].set(c, value);
}

void add_dimension_flags(CLI::App* cmd, DimensionFlags& flags, const TrialConfig* defaults,
                         std::string_view help_prefix) {
    for (std::size_t i = 0; i < kDimensionCount; ++i) {
        const Dimension& d = dimensions()[i];
        const std::string help =
            fmt::format("{}{}{}", help_prefix, d.help, d.is_enum() ? "" : fmt::format(" ({})", d.allowed()));
        CLI::Option* option = cmd->add_option(std::string(d.flag), flags.text[i], help);
        if (defaults) option->default_str(d.text(*defaults));
        option->type_name(d.is_enum() ? "TEXT" : "UINT");
        flags.options[i] = option;
    }
}

}  // namespace tune::cli
