#include "reports/measured_front_text.h"

#include <algorithm>
#include <vector>

#include <fmt/format.h>

#include "reports/front_ties.h"
#include "reports/report_format.h"
#include "reports/risk_note.h"
#include "reports/text_table.h"

namespace tune {
namespace {

// (measured - estimated) / estimated peak, or "-" without an estimate.
std::string peak_error_text(std::uint64_t measured, std::uint64_t estimated) {
    if (estimated == 0) return "-";
    return fmt::format("{:+.1f}%", 100.0 * (static_cast<double>(measured) - static_cast<double>(estimated)) /
                                       static_cast<double>(estimated));
}

}  // namespace

std::string measured_front_text(std::span<const TrialRecord> front) {
    if (front.empty()) return {};
    std::vector<const TrialConfig*> configs;
    std::vector<const TrialRecord*> records;
    for (const TrialRecord& t : front) {
        configs.push_back(&t.result.config);
        records.push_back(&t);
    }
    const std::vector<std::string> ties = front_tie_marks(records);
    const bool any_tie = std::any_of(ties.begin(), ties.end(), [](const std::string& m) { return !m.empty(); });
    const bool notes = any_risk(configs);
    std::vector<std::string> more{"trial", "peak", "est. peak", "error", "tokens/s", "MFU"};
    if (any_tie) more.emplace_back("tie");
    if (notes) more.emplace_back("note");
    TextTable table(config_header(more));
    for (std::size_t k = 0; k < front.size(); ++k) {
        const TrialResult& r = front[k].result;
        const std::uint64_t est = r.estimate ? r.estimate->memory.peak : 0;
        std::vector<std::string> cells{std::to_string(front[k].id), bytes_text(r.memory.peak), est ? bytes_text(est) : "-",
                                       peak_error_text(r.memory.peak, est), throughput_text(r.tokens_per_s),
                                       fmt::format("{:.1f}%", r.mfu * 100)};
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
