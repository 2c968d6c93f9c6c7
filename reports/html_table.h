// A data table in the report. Numeric columns are marked so the page's script
// sorts them as numbers. Interactive tables also get a filter box and pages.
//
// A big interactive table (10,000 trials) would cost the browser seconds to
// parse and lay out, so beyond kInlineRows its rows go into the page data and
// the script builds one page of rows at a time; the full table is still in the
// HTML inside <noscript>, which a browser with scripting on keeps as inert
// text, so readers without JavaScript see every row.
#pragma once

#include <string>
#include <vector>

#include "reports/html_writer.h"
#include "reports/page_data.h"

namespace tune {

struct HtmlColumn {
    std::string title;
    bool numeric = false;
    std::string help;  // tooltip on the header; empty for none
};

struct HtmlCell {
    std::string text;
    std::string css_class;  // e.g. "st-ok"; empty for none
    std::string sort{};   // the number a numeric column sorts by when the text has a unit ("2.50 MiB"); empty: the text
    std::string title{};  // the full text on hover when `text` is shortened; empty for none
};

// Cells of a scaled number: the text in its unit, sorted by the plain value.
HtmlCell bytes_cell(std::uint64_t bytes);
HtmlCell throughput_cell(double tokens_per_s);

// The tooltip of a "real peak" column (train/memory/real_memory.h).
inline constexpr const char* kRealPeakTitle =
    "the most the machine held for the trial: the process's resident set (CPU) or the device's used memory (GPU)";

inline constexpr std::size_t kInlineRows = 100;  // the script's page size too

class HtmlTable {
public:
    explicit HtmlTable(std::vector<HtmlColumn> columns) : columns_(std::move(columns)) {}
    void add_row(std::vector<HtmlCell> cells) { rows_.push_back(std::move(cells)); }
    std::size_t size() const { return rows_.size(); }

    // `id` may be empty. An empty table writes `empty_text` instead.
    void write(HtmlWriter& html, const std::string& id, bool interactive, const std::string& empty_text) const;
    // Interactive, paged through `page` when it has more than kInlineRows rows.
    void write(HtmlWriter& html, const std::string& id, const std::string& empty_text, PageData& page) const;

private:
    nlohmann::json columns_json() const;
    nlohmann::json rows_json() const;

    std::vector<HtmlColumn> columns_;
    std::vector<std::vector<HtmlCell>> rows_;
};

}  // namespace tune
