// Memory of the front's configurations by component, estimated beside
// measured: stacked bars (one estimated and one measured bar per trial) and
// the same numbers as a table.
#include <algorithm>

#include <fmt/format.h>

#include "reports/html_chart.h"
#include "reports/html_sections.h"
#include "reports/html_table.h"
#include "reports/report_format.h"

namespace tune {
namespace {

constexpr std::size_t kMaxBreakdownTrials = 16;

std::vector<std::size_t> shown(const SweepData& sweep) {
    std::vector<std::size_t> out(sweep.front.begin(), sweep.front.end());
    if (out.size() > kMaxBreakdownTrials) out.resize(kMaxBreakdownTrials);
    return out;
}

// Components with any bytes in the shown trials, estimated or measured.
std::vector<Component> used_components(const SweepData& sweep, const std::vector<std::size_t>& trials) {
    std::vector<Component> out;
    for (Component c : kComponents) {
        bool any = false;
        for (auto i : trials) {
            const TrialResult& r = sweep.trials[i].result;
            any = any || r.memory[c] != 0 || (r.estimate && r.estimate->memory[c] != 0);
        }
        if (any) out.push_back(c);
    }
    return out;
}

nlohmann::json breakdown_spec(const SweepData& sweep, const std::vector<std::size_t>& trials,
                              const std::vector<Component>& components) {
    nlohmann::json labels = nlohmann::json::array();
    std::uint64_t largest = 0;
    const auto drawn_total = [&](const MemoryBreakdown& m) {
        std::uint64_t sum = 0;
        for (Component c : components) sum += m[c];
        return sum;
    };
    for (auto i : trials) {
        const TrialResult& r = sweep.trials[i].result;
        labels.push_back(fmt::format("trial {}", sweep.trials[i].id));
        largest = std::max({largest, drawn_total(r.memory), r.estimate ? drawn_total(r.estimate->memory) : 0});
    }
    const ByteUnit unit = byte_unit_for(largest);
    nlohmann::json series = nlohmann::json::array();
    for (Component c : components) {
        nlohmann::json est = nlohmann::json::array(), meas = nlohmann::json::array();
        for (auto i : trials) {
            const TrialResult& r = sweep.trials[i].result;
            est.push_back(r.estimate ? in_unit(r.estimate->memory[c], unit) : 0.0);
            meas.push_back(in_unit(r.memory[c], unit));
        }
        series.push_back({{"component", to_string(c)}, {"estimated", std::move(est)}, {"measured", std::move(meas)}});
    }
    return {{"kind", "breakdown"}, {"unit", unit.name}, {"labels", std::move(labels)}, {"series", std::move(series)}};
}

HtmlTable breakdown_table(const SweepData& sweep, const std::vector<std::size_t>& trials,
                          const std::vector<Component>& components) {
    std::vector<HtmlColumn> columns{{"trial", true, ""}, {"", false, ""}};
    for (Component c : components) columns.push_back({std::string(to_string(c)), true, "per GPU at the peak"});
    columns.push_back({"peak", true, "the peak can be below the sum when components peak at different times"});
    HtmlTable table(std::move(columns));
    for (auto i : trials) {
        const TrialRecord& t = sweep.trials[i];
        const auto row = [&](const char* kind, const MemoryBreakdown& m) {
            std::vector<HtmlCell> cells{{std::to_string(t.id), ""}, {kind, ""}};
            for (Component c : components) cells.push_back(bytes_cell(m[c]));
            cells.push_back(bytes_cell(m.peak));
            table.add_row(std::move(cells));
        };
        if (t.result.estimate) row("estimated", t.result.estimate->memory);
        row("measured", t.result.memory);
    }
    return table;
}

}  // namespace

void write_breakdown_section(HtmlWriter& html, PageData& page, const SweepData& sweep, const std::string& prefix) {
    open_section(html, prefix + "breakdown", "Memory breakdown of the front");
    const auto trials = shown(sweep);
    if (trials.empty()) {
        html.element("p", "No trial finished, so there is nothing to break down.", {{"class", "empty"}});
        html.close("section");
        return;
    }
    const auto components = used_components(sweep, trials);
    std::string caption = "Per GPU, at the moment of the peak. Left bar of each pair: estimated; right: measured.";
    if (sweep.front.size() > trials.size())
        caption +=
            fmt::format(" The first {} of {} front configurations, by peak memory.", trials.size(), sweep.front.size());
    // The overhead (the process's baseline, the CUDA context) is the same in every bar and can dwarf
    // the states that differ: the chart leaves it out and says so; the table keeps it.
    std::vector<Component> drawn = components;
    std::erase(drawn, Component::overhead);
    if (drawn.size() < components.size() && !drawn.empty())
        caption += fmt::format(
            " The bars leave out the overhead (the process's baseline{}), alike in every "
            "configuration: {} measured in the first; the table below has it.",
            sweep.summary.record.backend == "cpu" ? "" : " and the CUDA context",
            bytes_text(sweep.trials[trials.front()].result.memory[Component::overhead]));
    else
        drawn = components;
    write_chart(html, page, prefix + "breakdown-chart", breakdown_spec(sweep, trials, drawn), caption);
    breakdown_table(sweep, trials, components).write(html, prefix + "breakdown-table", false, "");
    html.close("section");
}

}  // namespace tune
