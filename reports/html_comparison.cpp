// Two sweeps compared: both fronts on one chart, and for every configuration
// present in both, its throughput and peak memory side by side with the change.
#include <algorithm>

#include <fmt/format.h>

#include "reports/comparison.h"
#include "reports/html_chart.h"
#include "reports/html_sections.h"
#include "reports/html_table.h"
#include "reports/report_format.h"

namespace tune {
namespace {

nlohmann::json sweep_points(const SweepData& sweep, ByteUnit unit) {
    nlohmann::json points = nlohmann::json::array();
    for (auto i : plotted_trials(sweep, kMaxScatterPoints / 2)) points.push_back(pareto_point(sweep.trials[i], unit));
    return points;
}

nlohmann::json fronts_spec(const SweepData& a, const SweepData& b) {
    const SweepData* drawn[] = {&a, &b};
    const ByteUnit u = memory_axis_unit(drawn);
    return {{"kind", "pareto"},
            {"x_unit", u.name},
            {"groups", nlohmann::json::array({{{"label", a.name()}, {"points", sweep_points(a, u)}},
                                              {{"label", b.name()}, {"points", sweep_points(b, u)}}})},
            {"fronts", nlohmann::json::array({{{"label", "front: " + a.name()}, {"points", front_line(a, u)}},
                                              {{"label", "front: " + b.name()}, {"points", front_line(b, u)}}})},
            {"limits", a.memory_limit == b.memory_limit
                           ? nlohmann::json::array({memory_limit_line(a, u)})
                           : nlohmann::json::array({memory_limit_line(a, u), memory_limit_line(b, u)})}};
}

bool finished(const TrialRecord& t) { return t.result.status == TrialStatus::ok && t.measured; }
HtmlCell measured_rate(const TrialRecord& t) {
    return finished(t) ? throughput_cell(t.result.tokens_per_s) : HtmlCell{};
}
HtmlCell measured_peak(const TrialRecord& t) { return finished(t) ? bytes_cell(t.result.memory.peak) : HtmlCell{}; }

HtmlTable delta_table(const SweepData& a, const SweepData& b, const Comparison& c) {
    std::vector<HtmlColumn> columns;
    for (auto& col : config_columns()) columns.push_back(std::move(col));
    columns.insert(columns.end(), {{"matched by", false, "config hash, or the searched dimensions"},
                                   {"status A", false, a.name()},
                                   {"status B", false, b.name()},
                                   {"tokens/s A", true, a.name()},
                                   {"tokens/s B", true, b.name()},
                                   {"tokens/s change", true, "B against A"},
                                   {"peak A", true, a.name()},
                                   {"peak B", true, b.name()},
                                   {"peak change", true, "B against A"}});
    HtmlTable table(std::move(columns));
    for (const auto& m : c.matched) {
        const TrialRecord& ta = a.trials[m.baseline];
        const TrialRecord& tb = b.trials[m.other];
        std::vector<HtmlCell> row;
        for (auto& cell : config_cells(ta.result.config)) row.push_back({std::move(cell), ""});
        const bool both = finished(ta) && finished(tb);
        const std::string sa(to_string(ta.result.status)), sb(to_string(tb.result.status));
        row.push_back({m.by_hash ? "hash" : "dimensions", ""});
        row.push_back({sa, "st-" + sa});
        row.push_back({sb, "st-" + sb});
        row.push_back(measured_rate(ta));
        row.push_back(measured_rate(tb));
        row.push_back({both ? percent_text(delta_percent(ta.result.tokens_per_s, tb.result.tokens_per_s)) : "", ""});
        row.push_back(measured_peak(ta));
        row.push_back(measured_peak(tb));
        row.push_back({both ? percent_text(delta_percent(static_cast<double>(ta.result.memory.peak),
                                                         static_cast<double>(tb.result.memory.peak)))
                            : "",
                       ""});
        table.add_row(std::move(row));
    }
    return table;
}

std::string summary_text(const SweepData& a, const SweepData& b, const Comparison& c) {
    std::string out = fmt::format(
        "A = {}, B = {}. {} configurations are in both ({} matched by config hash, {} by the "
        "searched dimensions); {} finished in both.",
        a.name(), b.name(), c.matched.size(), c.by_hash, c.by_dimensions, c.both_ok);
    if (c.tokens_delta_median_pct && c.peak_delta_median_pct)
        out += fmt::format(" Median change from A to B: tokens/s {}, peak memory {}.",
                           percent_text(*c.tokens_delta_median_pct), percent_text(*c.peak_delta_median_pct));
    return out;
}

}  // namespace

void write_comparison_section(HtmlWriter& html, PageData& page, const SweepData& baseline, const SweepData& other,
                              const std::string& prefix) {
    open_section(html, prefix + "comparison", fmt::format("{} against {}", other.name(), baseline.name()));
    const Comparison c = compare_sweeps(baseline, other);
    html.element("p", summary_text(baseline, other, c));
    write_chart(html, page, prefix + "fronts-chart", fronts_spec(baseline, other),
                "Both sweeps' finished trials (colour by sweep, marker by ZeRO stage) and their Pareto fronts.");
    html.element("h3", "Configurations in both");
    delta_table(baseline, other, c).write(html, prefix + "delta-table", "No configuration is in both sweeps.", page);
    html.close("section");
}

}  // namespace tune
