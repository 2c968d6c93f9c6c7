// A data table in the report. Numeric columns are marked so the page's script
// sorts them as numbers; `interactive` tables get sorting, a filter box and
// pages (the rows are all in the HTML, so the table reads without JavaScript).
#pragma once

#include <string>
#include <vector>

#include "reports/html_writer.h"

namespace tune {

struct HtmlColumn {
    std::string title;
    bool numeric = false;
    std::string help;  // tooltip on the header; empty for none
};

struct HtmlCell {
    std::string text;
    std::string css_class;  // e.g. "st-ok"; empty for none
};

class HtmlTable {
public:
    explicit HtmlTable(std::vector<HtmlColumn> columns) : columns_(std::move(columns)) {}
    void add_row(std::vector<HtmlCell> cells) { rows_.push_back(std::move(cells)); }
    std::size_t size() const { return rows_.size(); }

    // `id` may be empty. An empty table writes `empty_text` instead.
    void write(HtmlWriter& html, const std::string& id, bool interactive, const std::string& empty_text) const;

private:
    std::vector<HtmlColumn> columns_;
    std::vector<std::vector<HtmlCell>> rows_;
};

}  // namespace tune
