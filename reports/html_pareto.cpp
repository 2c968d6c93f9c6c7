// The Pareto chart (peak memory against tokens/s, colour by optimizer, marker
// by ZeRO stage, the front as a line, the memory limit as a vertical line)
// and the table of the front's configurations.
#include <fmt/format.h>

#include "reports/front_ties.h"
#include "reports/html_chart.h"
#include "reports/html_sections.h"
#include "reports/html_table.h"
#include "reports/report_format.h"

namespace tune {

namespace {

nlohmann::json pareto_spec(const SweepData& sweep) {
    const SweepData* drawn[] = {&sweep};
    const ByteUnit unit = memory_axis_unit(drawn);
    nlohmann::json groups = nlohmann::json::array();
    for (Optimizer o : kOptimizers) {
        nlohmann::json points = nlohmann::json::array();
        for (auto i : plotted_trials(sweep, kMaxScatterPoints))
            if (sweep.trials[i].result.config.optimizer == o) points.push_back(pareto_point(sweep.trials[i], unit));
        if (!points.empty()) groups.push_back({{"label", to_string(o)}, {"points", std::move(points)}});
    }
    return {{"kind", "pareto"},
            {"x_unit", unit.name},
            {"groups", std::move(groups)},
            {"fronts", nlohmann::json::array({{{"label", "Pareto front"}, {"points", front_line(sweep, unit)}}})},
            {"limits", nlohmann::json::array({memory_limit_line(sweep, unit)})}};
}

HtmlTable front_table(const SweepData& sweep) {
    std::vector<HtmlColumn> columns{{"trial", true, ""}};
    for (auto& c : config_columns()) columns.push_back(std::move(c));
    columns.insert(columns.end(), {{"peak", true, "measured peak memory per GPU: the allocator's, baseline included"},
                                   {"real peak", true, kRealPeakTitle},
                                   {"tokens/s", true, "measured, warmup excluded"},
                                   {"MFU %", true, "model FLOPs utilization"},
                                   {"est. peak", true, "the estimator's prediction"},
                                   {"est. tokens/s", true, "the estimator's prediction"},
                                   {"noise", false, "coefficient of variation of the timed steps (n of them)"},
                                   {"tie", false, front_tie_legend()},
                                   risk_column()});
    // Under the sweep's [framework]: the device memory that stack is predicted to use, where the user trains.
    const std::string& framework = sweep.summary.record.framework;
    if (framework != "tune")
        columns.insert(columns.end() - 3,
                       HtmlColumn{framework + " peak (pred.)", true,
                                  "the device memory " + framework + " is predicted to use per GPU"});
    HtmlTable table(std::move(columns));
    const std::vector<std::string> ties = front_tie_marks(sweep), noise = front_noise_texts(sweep);
    for (std::size_t k = 0; k < sweep.front.size(); ++k) {
        const TrialRecord& t = sweep.trials[sweep.front[k]];
        std::vector<HtmlCell> row{{std::to_string(t.id), ""}};
        for (auto& c : config_cells(t.result.config)) row.push_back({std::move(c), ""});
        row.push_back(bytes_cell(t.result.memory.peak));
        row.push_back(t.result.real_peak ? bytes_cell(t.result.real_peak) : HtmlCell{});
        row.push_back(throughput_cell(t.result.tokens_per_s));
        row.push_back({fmt::format("{:.1f}", t.result.mfu * 100), ""});
        const auto& e = t.result.estimate;
        row.push_back(e ? bytes_cell(e->memory.peak) : HtmlCell{});
        row.push_back(e ? throughput_cell(e->tokens_per_s) : HtmlCell{});
        if (framework != "tune") {
            const auto it = t.frameworks.find(framework);
            if (it == t.frameworks.end())
                row.push_back(HtmlCell{});
            else if (!it->second.invalid.empty())
                row.push_back({"cannot run", ""});
            else
                row.push_back(bytes_cell(it->second.device));
        }
        row.push_back({noise[k], ""});
        row.push_back({ties[k], ""});
        row.push_back(risk_cell(t.result.config));
        table.add_row(std::move(row));
    }
    return table;
}

}  // namespace

void write_pareto_section(HtmlWriter& html, PageData& page, const SweepData& sweep, const std::string& prefix) {
    open_section(html, prefix + "pareto", "Pareto front (measured): peak memory against throughput");
    const auto plotted = plotted_trials(sweep, kMaxScatterPoints);
    std::size_t ok = 0;
    for (const auto& t : sweep.trials) ok += t.result.status == TrialStatus::ok && t.measured;
    std::string caption = fmt::format(
        "Each point is a trial that finished: colour by optimizer, marker by ZeRO stage (circle 0, square 1, "
        "triangle 2, diamond 3). The line joins the {} Pareto-optimal trials; the dashed line is the memory limit.",
        sweep.front.size());
    if (plotted.size() < ok)
        caption +=
            fmt::format(" {} of {} trials are drawn (the front plus one per grid cell); the table below has all.",
                        plotted.size(), ok);
    write_chart(html, page, prefix + "pareto-chart", pareto_spec(sweep), caption);
    html.element("h3", "Pareto-optimal configurations");
    html.element("p", front_tie_legend());
    front_table(sweep).write(html, prefix + "front-table", false,
                             "No trial was measured ok, so there is no measured front; see the predicted front below.");
    html.close("section");
}

}  // namespace tune
