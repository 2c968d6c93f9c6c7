// The funnel: how many configurations each stage kept, with a bar per stage
// (plain markup, so it shows without JavaScript).
#include <algorithm>

#include <fmt/format.h>

#include "reports/funnel.h"
#include "reports/html_sections.h"

namespace tune {
namespace {

void write_count_cell(HtmlWriter& html, const FunnelStage& stage, std::uint64_t enumerated) {
    const double share = enumerated ? static_cast<double>(stage.count) / static_cast<double>(enumerated) : 0.0;
    html.open("td", {{"class", "funnel-cell"}});
    html.open("span", {{"class", "funnel-count"}}).text(std::to_string(stage.count)).close("span");
    const std::string width = fmt::format("width:{:.1f}%", std::clamp(share * 100.0, 0.0, 100.0));
    html.open("span", {{"class", "funnel-bar"}})
        .empty("span", {{"class", "funnel-fill st-" + stage.name.substr(0, stage.name.find(' '))}, {"style", width}});
    html.close("span");
    html.close("span");
    html.close("td");
}

}  // namespace

void write_funnel_section(HtmlWriter& html, std::span<const SweepData> sweeps) {
    open_section(html, "funnel", "Funnel");
    std::vector<std::vector<FunnelStage>> stages;
    std::size_t rows = 0;
    for (const auto& s : sweeps) {
        stages.push_back(funnel(s.summary));
        rows = std::max(rows, stages.back().size());
    }
    html.open("div", {{"class", "table-wrap"}}).open("table", {{"class", "funnel"}});
    html.open("thead").open("tr").element("th", "stage");
    for (const auto& s : sweeps) html.element("th", s.name());
    html.close("tr").close("thead").open("tbody");
    for (std::size_t r = 0; r < rows; ++r) {
        const FunnelStage* any = nullptr;
        for (const auto& st : stages)
            if (r < st.size()) any = &st[r];
        html.open("tr").open(
            "th", {{"scope", "row"}, {"class", fmt::format("depth{}", any->depth)}, {"title", any->meaning}});
        html.text(any->name).close("th");
        for (std::size_t i = 0; i < sweeps.size(); ++i) {
            if (r < stages[i].size())
                write_count_cell(html, stages[i][r], sweeps[i].summary.total());
            else
                html.element("td", "");
        }
        html.close("tr");
    }
    html.close("tbody").close("table").close("div");
    html.close("section");
}

}  // namespace tune
