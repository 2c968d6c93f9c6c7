#include "reports/predicted_front.h"

#include <fmt/format.h>

#include "core/pareto.h"
#include "reports/report_format.h"
#include "reports/risk_note.h"
#include "reports/text_table.h"

namespace tune {

std::vector<std::size_t> predicted_front(std::span<const PredictedRow> rows) {
    std::vector<std::optional<ParetoPoint>> points;
    points.reserve(rows.size());
    for (const PredictedRow& r : rows) points.push_back(r.estimate ? predicted_point(*r.estimate) : std::nullopt);
    return front_of(points);
}

std::vector<PredictedRow> predicted_rows(std::span<const TrialRecord> trials) {
    std::vector<PredictedRow> rows;
    for (const TrialRecord& t : trials) {
        const TrialStatus s = t.result.status;
        if (t.measured || !t.result.estimate || (s != TrialStatus::pending && s != TrialStatus::running)) continue;
        rows.push_back({&t.result.config, &*t.result.estimate, t.id});
    }
    return rows;
}

std::string predicted_front_text(std::span<const PredictedRow> rows, std::span<const std::size_t> front,
                                 const std::string& indent) {
    if (front.empty()) return "Nothing is predicted to fit, so there is no predicted front.\n";
    bool stored = false;
    for (std::size_t i : front) stored = stored || rows[i].trial != 0;
    std::vector<const TrialConfig*> configs;
    for (std::size_t i : front) configs.push_back(rows[i].config);
    const bool notes = any_risk(configs);
    std::vector<std::string> more{"est. peak", "phase", "est. tokens/s", "est. MFU", "step"};
    if (stored) more.insert(more.begin(), "trial");
    if (notes) more.push_back("note");
    TextTable table(config_header(more));
    for (std::size_t i : front) {
        const Estimate& e = *rows[i].estimate;
        std::vector<std::string> cells{bytes_text(e.memory.peak), e.memory.peak_phase, throughput_text(e.tokens_per_s),
                                       fmt::format("{:.1f}%", e.mfu * 100), fmt::format("{:.3g}s", e.step_s)};
        if (stored) cells.insert(cells.begin(), std::to_string(rows[i].trial));
        if (notes) cells.push_back(risk_cell_text(*rows[i].config));
        table.add_row(config_row(*rows[i].config, cells));
    }
    return fmt::format("Predicted Pareto front (predicted: estimates only, nothing here was measured; peak memory "
                       "per rank vs tokens/s, {} configurations that fit):\n{}{}",
                       front.size(), table.render(indent), risk_footnotes(configs, indent));
}

}  // namespace tune
