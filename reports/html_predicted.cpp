// The predicted Pareto front: for the configurations not measured, what the
// estimator says fits, the fastest for its memory. After the measured front, and
// labelled "predicted" in its title, chart, columns and caption; an
// estimate-only sweep has only this one.
#include <fmt/format.h>

#include "reports/html_chart.h"
#include "reports/html_sections.h"
#include "reports/html_table.h"
#include "reports/report_format.h"
#include "core/convergence_risk.h"

namespace tune {

namespace {

nlohmann::json predicted_point_json(const TrialRecord& t, ByteUnit unit) {
    const Estimate& e = *t.result.estimate;
    nlohmann::json lines = nlohmann::json::array();
    lines.push_back(fmt::format("trial {} (predicted, not measured): {}", t.id, summary(t.result.config)));
    lines.push_back(fmt::format("predicted peak {} ({}), {} tokens/s, MFU {:.1f}%", bytes_text(e.memory.peak),
                                e.memory.peak_phase, throughput_text(e.tokens_per_s), e.mfu * 100));
    if (const auto risk = convergence_risk(t.result.config)) lines.push_back(fmt::format("{}: {}", kConvergenceRiskLabel, *risk));
    return {{"x", in_unit(e.memory.peak, unit)}, {"y", e.tokens_per_s}, {"z", t.result.config.zero_stage}, {"t", lines}};
}

nlohmann::json predicted_spec(const SweepData& sweep) {
    const SweepData* drawn[] = {&sweep};
    const ByteUnit unit = memory_axis_unit(drawn);
    nlohmann::json groups = nlohmann::json::array();
    for (Optimizer o : kOptimizers) {
        nlohmann::json points = nlohmann::json::array();
        for (auto i : sweep.predicted_front)
            if (sweep.trials[i].result.config.optimizer == o) points.push_back(predicted_point_json(sweep.trials[i], unit));
        if (!points.empty()) groups.push_back({{"label", fmt::format("{} (predicted)", to_string(o))}, {"points", std::move(points)}});
    }
    nlohmann::json line = nlohmann::json::array();
    for (auto i : sweep.predicted_front) line.push_back(predicted_point_json(sweep.trials[i], unit));
    return {{"kind", "pareto"},
            {"x_unit", unit.name},
            {"groups", std::move(groups)},
            {"fronts", nlohmann::json::array({{{"label", "predicted Pareto front"}, {"points", std::move(line)}}})},
            {"limits", nlohmann::json::array({memory_limit_line(sweep, unit)})}};
}

HtmlTable predicted_table(const SweepData& sweep) {
    std::vector<HtmlColumn> columns{{"trial", true, ""}};
    for (auto& c : config_columns()) columns.push_back(std::move(c));
    columns.insert(columns.end(), {{"predicted peak", true, "the estimator's peak memory per GPU; not measured"},
                                   {"peak phase", false, "where in the step the predicted peak falls"},
                                   {"predicted tokens/s", true, "the estimator's throughput; not measured"},
                                   {"predicted MFU %", true, "model FLOPs utilization the estimator expects"},
                                   risk_column()});
    HtmlTable table(std::move(columns));
    for (auto i : sweep.predicted_front) {
        const TrialRecord& t = sweep.trials[i];
        const Estimate& e = *t.result.estimate;
        std::vector<HtmlCell> row{{std::to_string(t.id), ""}};
        for (auto& c : config_cells(t.result.config)) row.push_back({std::move(c), ""});
        row.push_back(bytes_cell(e.memory.peak));
        row.push_back({e.memory.peak_phase, ""});
        row.push_back(throughput_cell(e.tokens_per_s));
        row.push_back({fmt::format("{:.1f}", e.mfu * 100), ""});
        row.push_back(risk_cell(t.result.config));
        table.add_row(std::move(row));
    }
    return table;
}

}  // namespace

void write_predicted_section(HtmlWriter& html, PageData& page, const SweepData& sweep, const std::string& prefix) {
    open_section(html, prefix + "predicted", "Predicted Pareto front (estimates only, not measured)");
    if (!sweep.predicted_front.empty()) {
        const std::string caption = fmt::format(
            "Predicted: the estimator's peak memory and throughput for the {} configurations, among those not "
            "measured, that are predicted to fit within the usable memory and are the fastest for their memory. "
            "Nothing here was measured; the dashed line is the memory limit.",
            sweep.predicted_front.size());
        write_chart(html, page, prefix + "predicted-chart", predicted_spec(sweep), caption);
    }
    html.element("h3", "Predicted Pareto-optimal configurations");
    predicted_table(sweep).write(html, prefix + "predicted-table", false,
                                 "No configuration left unmeasured is predicted to fit.");
    html.close("section");
}

}  // namespace tune
