#include "reports/risk_note.h"

#include <algorithm>

#include <fmt/format.h>

#include "core/convergence_risk.h"

namespace tune {

bool any_risk(std::span<const TrialConfig* const> configs) {
    return std::any_of(configs.begin(), configs.end(),
                       [](const TrialConfig* c) { return convergence_risk(*c).has_value(); });
}

std::string risk_cell_text(const TrialConfig& c) {
    return convergence_risk(c) ? std::string(kConvergenceRiskLabel) : "";
}

std::string risk_footnotes(std::span<const TrialConfig* const> configs, const std::string& indent) {
    std::vector<std::string_view> seen;
    std::string out;
    for (const TrialConfig* c : configs) {
        const auto risk = convergence_risk(*c);
        if (!risk || std::find(seen.begin(), seen.end(), *risk) != seen.end()) continue;
        seen.push_back(*risk);
        out += fmt::format("{}{}: {}\n", indent, kConvergenceRiskLabel, *risk);
    }
    return out;
}

}  // namespace tune
