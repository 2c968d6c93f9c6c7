// Aligned plain-text tables for the terminal: a header row, a rule, rows.
// Columns whose cells look numeric are right-aligned. Control characters in
// cells (a sweep name from someone else's database could carry terminal
// escape sequences) are shown as \xNN, never sent to the terminal.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace tune {

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
