#include "reports/html_table.h"

#include <fmt/format.h>

#include "reports/html_escape.h"
#include "reports/report_format.h"

namespace tune {
namespace {

void write_header(HtmlWriter& html, const std::vector<HtmlColumn>& columns) {
    html.open("thead").open("tr");
    for (const auto& c : columns) {
        if (c.help.empty())
            html.open("th", {{"data-type", c.numeric ? "num" : "text"}});
        else
            html.open("th", {{"data-type", c.numeric ? "num" : "text"}, {"title", c.help}});
        html.text(c.title).close("th");
    }
    html.close("tr").close("thead");
}

// Rows are the bulk of a 10,000-trial report: appended directly, without a
// writer call per attribute.
void write_row(std::string& out, const std::vector<HtmlCell>& row) {
    out += "<tr>";
    for (const auto& cell : row) {
        out += "<td";
        if (!cell.css_class.empty()) out += " class=\"" + escape_html(cell.css_class) + "\"";
        if (!cell.sort.empty()) out += " data-sort=\"" + escape_html(cell.sort) + "\"";
        if (!cell.title.empty()) out += " title=\"" + escape_html(cell.title) + "\"";
        out += ">";
        out += escape_html(cell.text);
        out += "</td>";
    }
    out += "</tr>\n";
}

}  // namespace

HtmlCell bytes_cell(std::uint64_t bytes) { return {bytes_text(bytes), "", std::to_string(bytes), ""}; }

HtmlCell throughput_cell(double tokens_per_s) {
    return {throughput_text(tokens_per_s), "", fmt::format("{:.6g}", tokens_per_s), ""};
}

void HtmlTable::write(HtmlWriter& html, const std::string& id, bool interactive, const std::string& empty_text) const {
    if (rows_.empty()) {
        html.element("p", empty_text, {{"class", "empty"}});
        return;
    }
    const char* css = interactive ? "data interactive" : "data";
    html.open("div", {{"class", "table-wrap"}});
    if (id.empty())
        html.open("table", {{"class", css}});
    else
        html.open("table", {{"class", css}, {"id", id}});
    write_header(html, columns_);
    html.open("tbody");
    html.raw("\n");
    for (const auto& row : rows_) write_row(html.str(), row);
    html.close("tbody").close("table").close("div");
}

nlohmann::json HtmlTable::columns_json() const {
    nlohmann::json out = nlohmann::json::array();
    for (const auto& c : columns_) out.push_back({{"title", c.title}, {"num", c.numeric}, {"help", c.help}});
    return out;
}

// A cell is its text, or [text, class, sort, title] when it has more than text.
nlohmann::json HtmlTable::rows_json() const {
    nlohmann::json out = nlohmann::json::array();
    for (const auto& row : rows_) {
        nlohmann::json cells = nlohmann::json::array();
        for (const auto& cell : row) {
            if (cell.css_class.empty() && cell.sort.empty() && cell.title.empty())
                cells.push_back(cell.text);
            else
                cells.push_back(nlohmann::json::array({cell.text, cell.css_class, cell.sort, cell.title}));
        }
        out.push_back(std::move(cells));
    }
    return out;
}

void HtmlTable::write(HtmlWriter& html, const std::string& id, const std::string& empty_text, PageData& page) const {
    if (rows_.size() <= kInlineRows) {
        write(html, id, true, empty_text);
        return;
    }
    page.tables[id] = {{"columns", columns_json()}, {"rows", rows_json()}};
    html.open("div", {{"class", "paged-table"}, {"id", id + "-paged"}, {"data-table", id}});
    html.open("noscript");
    write(html, id, false, empty_text);
    html.close("noscript");
    html.close("div");
}

}  // namespace tune
