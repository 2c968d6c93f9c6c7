// Aligned plain-text tables for the terminal: a header row, a rule, rows.
// Columns whose cells look numeric are right-aligned.
#pragma once

#include <string>
#include <vector>

namespace tune {

class TextTable {
public:
    explicit TextTable(std::vector<std::string> header) : header_(std::move(header)) {}
    void add_row(std::vector<std::string> cells) { rows_.push_back(std::move(cells)); }
    bool empty() const { return rows_.empty(); }
    std::string render(const std::string& indent = "") const;

private:
    std::vector<std::string> header_;
    std::vector<std::vector<std::string>> rows_;
};

}  // namespace tune
