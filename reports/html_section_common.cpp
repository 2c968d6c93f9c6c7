// Pieces several sections share: section headings and the configuration columns.
#include <fmt/format.h>

#include "reports/html_sections.h"

#include "core/convergence_risk.h"
#include "core/dimensions.h"
#include "core/parallel_plan.h"

namespace tune {

void open_section(HtmlWriter& html, const std::string& id, std::string_view title) {
    html.open("section", {{"id", id}});
    html.element("h2", title);
}

std::vector<HtmlColumn> config_columns() {
    std::vector<HtmlColumn> columns;
    for (const Dimension& d : dimensions())
        columns.push_back({std::string(d.header), !d.is_enum(), std::string(d.help)});
    columns.push_back({"GPUs", true, "ranks per trial"});
    return columns;
}

std::vector<std::string> config_cells(const TrialConfig& c) {
    const auto cells = dimension_cells(c);
    std::vector<std::string> out(cells.begin(), cells.end());
    out.push_back(std::to_string(parallel_plan(c).world()));
    return out;
}

HtmlColumn risk_column() { return {"note", false, "a reason to check this configuration before training with it"}; }

HtmlCell risk_cell(const TrialConfig& c) {
    const auto risk = convergence_risk(c);
    if (!risk) return {};
    return {std::string(kConvergenceRiskLabel), "risk", "", std::string(*risk)};
}

}  // namespace tune
