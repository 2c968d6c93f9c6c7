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
    for (const PredictedRow& r : rows) {
        if (!r.framework_name.empty())
            points.push_back(r.framework ? predicted_point(*r.framework) : std::nullopt);
        else
            points.push_back(r.estimate ? predicted_point(*r.estimate) : std::nullopt);
    }
    return front_of(points);
}

PredictedRow predicted_row(const TrialRecord& t) {
    PredictedRow row{&t.result.config, t.result.estimate ? &*t.result.estimate : nullptr, t.id, nullptr, {}};
    if (t.sweep_framework == "tune") return row;
    row.framework_name = t.sweep_framework;
    if (const auto it = t.frameworks.find(t.sweep_framework); it != t.frameworks.end()) row.framework = &it->second;
    return row;
}

std::vector<PredictedRow> predicted_rows(std::span<const TrialRecord> trials) {
    std::vector<PredictedRow> rows;
    for (const TrialRecord& t : trials) {
        const TrialStatus s = t.result.status;
        if (t.measured || !t.result.estimate || (s != TrialStatus::pending && s != TrialStatus::running)) continue;
        rows.push_back(predicted_row(t));
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
    // Under a framework the front is that stack's: its device memory and tokens/s lead, our
    // engine's estimate follows.
    const std::string& framework = rows[front.front()].framework_name;
    std::vector<std::string> more{"est. peak", "phase", "est. tokens/s", "est. MFU", "step"};
    if (!framework.empty())
        more.insert(more.begin(), {fmt::format("{} peak", framework), fmt::format("{} tokens/s", framework)});
    if (stored) more.insert(more.begin(), "trial");
    if (notes) more.push_back("note");
    TextTable table(config_header(more));
    for (std::size_t i : front) {
        const Estimate& e = *rows[i].estimate;
        std::vector<std::string> cells{bytes_text(e.memory.peak), e.memory.peak_phase, throughput_text(e.tokens_per_s),
                                       fmt::format("{:.1f}%", e.mfu * 100), fmt::format("{:.3g}s", e.step_s)};
        if (rows[i].framework)
            cells.insert(cells.begin(),
                         {bytes_text(rows[i].framework->device), throughput_text(rows[i].framework->tokens_per_s)});
        if (stored) cells.insert(cells.begin(), std::to_string(rows[i].trial));
        if (notes) cells.push_back(risk_cell_text(*rows[i].config));
        table.add_row(config_row(*rows[i].config, cells));
    }
    const std::string basis = framework.empty()
                                  ? std::string("peak memory per rank vs tokens/s")
                                  : fmt::format("{}'s predicted device memory per GPU vs its tokens/s", framework);
    return fmt::format(
        "Predicted Pareto front (predicted: estimates only, nothing here was measured; {}, {} "
        "configurations that fit):\n{}{}",
        basis, front.size(), table.render(indent), risk_footnotes(configs, indent));
}

}  // namespace tune
