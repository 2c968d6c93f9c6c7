// Aligned plain-text tables for the terminal: a header row, a rule, rows.
// Columns whose cells look numeric are right-aligned. Control characters in
// cells (a sweep name from someone else's database could carry terminal
// escape sequences) are shown as \xNN, never sent to the terminal.
#pragma once

#include <string>
#include <vector>

namespace tune {

// `text` with every ASCII control character (and DEL) written as \xNN.
std::string printable(const std::string& text);

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
