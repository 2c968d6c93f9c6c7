// Aligned plain-text tables for the terminal: a header row, a rule, rows.
// Columns whose cells look numeric are right-aligned. Control characters in
// cells (a sweep name from someone else's database could carry terminal
// escape sequences) are shown as \xNN, never sent to the terminal.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "core/config.h"

namespace tune {

// Table rows that show a configuration: its search dimensions (the dimension
// table's headers and values, in its order), then the table's own columns.
std::vector<std::string> config_header(const std::vector<std::string>& more);
std::vector<std::string> config_row(const TrialConfig& c, const std::vector<std::string>& more);

// `text` with every ASCII control character (and DEL) and every C1 control written as \xNN,
// except the characters in `keep` (a multi-line message keeps its "\n"). The one escape for
// everything tune prints that came from a file, a database or a flag.
std::string printable(std::string_view text, std::string_view keep = {});

class TextTable {
public:
    explicit TextTable(std::vector<std::string> header);
    void add_row(std::vector<std::string> cells);
    bool empty() const { return rows_.empty(); }
    std::string render(const std::string& indent = "") const;

private:
    std::vector<std::string> header_;
    std::vector<std::vector<std::string>> rows_;
};

}  // namespace tune
