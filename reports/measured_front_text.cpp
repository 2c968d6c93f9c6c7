#include "reports/measured_front_text.h"

#include <algorithm>
#include <vector>

#include <fmt/format.h>

#include "reports/accuracy.h"
#include "reports/front_ties.h"
#include "reports/report_format.h"
#include "reports/risk_note.h"
#include "reports/text_table.h"

namespace tune {
namespace {

// The estimate's error against the real peak (reports/accuracy.h peak_error), or "-".
std::string peak_error_text(const TrialResult& r) {
    const std::optional<double> error = peak_error(r);
    return error ? fmt::format("{:+.1f}%", *error) : "-";
}

// The stack the front's sweep answers for, when it is not our engine: its predicted device memory
// is a column, since that is what the user will see where they train.
std::string front_framework(std::span<const TrialRecord> front) {
    return front.front().sweep_framework == "tune" ? std::string() : front.front().sweep_framework;
}

std::string framework_peak_text(const TrialRecord& t, const std::string& framework) {
    const auto it = t.frameworks.find(framework);
    if (it == t.frameworks.end()) return "-";
    return it->second.invalid.empty() ? bytes_text(it->second.device) : "cannot run";
}

}  // namespace

std::string measured_front_text(std::span<const TrialRecord> front) {
    if (front.empty()) return {};
    const std::string framework = front_framework(front);
    std::vector<const TrialConfig*> configs;
    std::vector<const TrialRecord*> records;
    for (const TrialRecord& t : front) {
        configs.push_back(&t.result.config);
        records.push_back(&t);
    }
    const std::vector<std::string> ties = front_tie_marks(records);
    const bool any_tie = std::any_of(ties.begin(), ties.end(), [](const std::string& m) { return !m.empty(); });
    const bool notes = any_risk(configs);
    std::vector<std::string> more{"trial", "peak", "real peak", "est. peak", "error", "tokens/s", "MFU"};
    if (!framework.empty()) more.push_back(fmt::format("{} peak (pred.)", framework));
    if (any_tie) more.emplace_back("tie");
    if (notes) more.emplace_back("note");
    TextTable table(config_header(more));
    for (std::size_t k = 0; k < front.size(); ++k) {
        const TrialResult& r = front[k].result;
        const std::uint64_t est = r.estimate ? r.estimate->memory.peak : 0;
        std::vector<std::string> cells{std::to_string(front[k].id),
                                       bytes_text(r.memory.peak),
                                       r.real_peak > 0 ? bytes_text(r.real_peak) : "-",
                                       est ? bytes_text(est) : "-",
                                       peak_error_text(r),
                                       throughput_text(r.tokens_per_s),
                                       fmt::format("{:.1f}%", r.mfu * 100)};
        if (!framework.empty()) cells.push_back(framework_peak_text(front[k], framework));
        if (any_tie) cells.push_back(ties[k]);
        if (notes) cells.push_back(risk_cell_text(r.config));
        table.add_row(config_row(r.config, cells));
    }
    std::string out = fmt::format("Pareto front (measured peak memory vs tokens/s, {} configurations):\n{}{}",
                                  front.size(), table.render("  "), risk_footnotes(configs));
    if (any_tie) out += "  " + front_tie_legend() + "\n";
    return out;
}

}  // namespace tune
