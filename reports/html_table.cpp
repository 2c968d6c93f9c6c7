#include "reports/html_table.h"

#include "reports/html_escape.h"

namespace tune {
namespace {

void write_header(HtmlWriter& html, const std::vector<HtmlColumn>& columns) {
    html.open("thead").open("tr");
    for (const auto& c : columns) {
        if (c.help.empty()) html.open("th", {{"data-type", c.numeric ? "num" : "text"}});
        else html.open("th", {{"data-type", c.numeric ? "num" : "text"}, {"title", c.help}});
        html.text(c.title).close("th");
    }
    html.close("tr").close("thead");
}

// Rows are the bulk of a 10,000-trial report: appended directly, without a
// writer call per attribute.
void write_row(std::string& out, const std::vector<HtmlCell>& row) {
    out += "<tr>";
    for (const auto& cell : row) {
        if (cell.css_class.empty()) out += "<td>";
        else out += "<td class=\"" + escape_html(cell.css_class) + "\">";
        out += escape_html(cell.text);
        out += "</td>";
    }
    out += "</tr>\n";
}

}  // namespace

void HtmlTable::write(HtmlWriter& html, const std::string& id, bool interactive, const std::string& empty_text) const {
    if (rows_.empty()) {
        html.element("p", empty_text, {{"class", "empty"}});
        return;
    }
    const char* css = interactive ? "data interactive" : "data";
    html.open("div", {{"class", "table-wrap"}});
    if (id.empty()) html.open("table", {{"class", css}});
    else html.open("table", {{"class", css}, {"id", id}});
    write_header(html, columns_);
    html.open("tbody");
    html.raw("\n");
    for (const auto& row : rows_) write_row(html.str(), row);
    html.close("tbody").close("table").close("div");
}

}  // namespace tune
