// The predicted Pareto front: for the configurations not measured, what the
// estimator says fits, the fastest for its memory. After the measured front, and
// labelled "predicted" in its title, chart, columns and caption; an
// estimate-only sweep has only this one.
#include <fmt/format.h>

#include "core/convergence_risk.h"
#include "reports/html_chart.h"
#include "reports/html_sections.h"
#include "reports/html_table.h"
#include "reports/predicted_front.h"
#include "reports/report_format.h"

namespace tune {

namespace {

// Under the sweep's [framework] a point is that stack's predicted device memory and tokens/s,
// the front it was chosen on (reports/predicted_front.h); our engine's estimate is in its note.
nlohmann::json predicted_point_json(const TrialRecord& t, ByteUnit unit) {
    const Estimate& e = *t.result.estimate;
    const PredictedRow row = predicted_row(t);
    nlohmann::json lines = nlohmann::json::array();
    lines.push_back(fmt::format("trial {} (predicted, not measured): {}", t.id, summary(t.result.config)));
    if (row.framework)
        lines.push_back(fmt::format("{}: predicted device memory {}, {} tokens/s", row.framework_name,
                                    bytes_text(row.framework->device), throughput_text(row.framework->tokens_per_s)));
    lines.push_back(fmt::format("{}peak {} ({}), {} tokens/s, MFU {:.1f}%",
                                row.framework ? "tune's engine: " : "predicted ", bytes_text(e.memory.peak),
                                e.memory.peak_phase, throughput_text(e.tokens_per_s), e.mfu * 100));
    if (const auto risk = convergence_risk(t.result.config))
        lines.push_back(fmt::format("{}: {}", kConvergenceRiskLabel, *risk));
    const std::uint64_t x = row.framework ? row.framework->device : e.memory.peak;
    const double y = row.framework ? row.framework->tokens_per_s : e.tokens_per_s;
    return {{"x", in_unit(x, unit)}, {"y", y}, {"z", t.result.config.zero_stage}, {"t", lines}};
}

nlohmann::json predicted_spec(const SweepData& sweep) {
    const SweepData* drawn[] = {&sweep};
    const ByteUnit unit = memory_axis_unit(drawn);
    nlohmann::json groups = nlohmann::json::array();
    for (Optimizer o : kOptimizers) {
        nlohmann::json points = nlohmann::json::array();
        for (auto i : sweep.predicted_front)
            if (sweep.trials[i].result.config.optimizer == o)
                points.push_back(predicted_point_json(sweep.trials[i], unit));
        if (!points.empty())
            groups.push_back({{"label", fmt::format("{} (predicted)", to_string(o))}, {"points", std::move(points)}});
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
    const std::string& framework = sweep.summary.record.framework;
    if (framework != "tune")
        columns.insert(columns.end(), {{framework + " memory", true,
                                        "the device memory " + framework + " is predicted to use per GPU"},
                                       {framework + " tokens/s", true, framework + "'s predicted throughput"}});
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
        if (framework != "tune") {
            const PredictedRow p = predicted_row(t);
            row.push_back(p.framework ? bytes_cell(p.framework->device) : HtmlCell{});
            row.push_back(p.framework ? throughput_cell(p.framework->tokens_per_s) : HtmlCell{});
        }
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
