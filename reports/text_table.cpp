#include "reports/text_table.h"

#include "core/dimensions.h"

#include <algorithm>
#include <cctype>

#include <fmt/format.h>

namespace tune {

std::vector<std::string> config_header(const std::vector<std::string>& more) {
    std::vector<std::string> out;
    for (const Dimension& d : dimensions()) out.emplace_back(d.header);
    out.insert(out.end(), more.begin(), more.end());
    return out;
}

std::vector<std::string> config_row(const TrialConfig& c, const std::vector<std::string>& more) {
    const auto cells = dimension_cells(c);
    std::vector<std::string> out(cells.begin(), cells.end());
    out.insert(out.end(), more.begin(), more.end());
    return out;
}
namespace {

bool looks_numeric(const std::string& cell) {
    if (cell.empty()) return false;
    const unsigned char first = static_cast<unsigned char>(cell[0]);
    return std::isdigit(first) || ((cell[0] == '-' || cell[0] == '+') && cell.size() > 1);
}

// Display width, counting each UTF-8 code point once.
std::size_t width(const std::string& s) {
    return static_cast<std::size_t>(
        std::count_if(s.begin(), s.end(), [](char c) { return (static_cast<unsigned char>(c) & 0xC0) != 0x80; }));
}

}  // namespace

std::string printable(std::string_view text, std::string_view keep) {
    std::string out;
    out.reserve(text.size());
    for (std::size_t i = 0; i < text.size(); ++i) {
        const auto u = static_cast<unsigned char>(text[i]);
        const bool control = (u < 0x20 || u == 0x7f) && keep.find(text[i]) == std::string_view::npos;
        // U+0080..U+009F (UTF-8 C2 80..C2 9F) are the C1 controls: U+009B alone starts an escape
        // sequence on terminals that honour 8-bit controls.
        const bool c1 = u == 0xc2 && i + 1 < text.size() && (static_cast<unsigned char>(text[i + 1]) & 0xe0) == 0x80;
        if (control) {
            out += fmt::format("\\x{:02x}", u);
        } else if (c1) {
            out += fmt::format("\\xc2\\x{:02x}", static_cast<unsigned char>(text[i + 1]));
            ++i;
        } else {
            out += text[i];
        }
    }
    return out;
}

TextTable::TextTable(std::vector<std::string> header) {
    for (std::string& cell : header) header_.push_back(printable(cell));
}

void TextTable::add_row(std::vector<std::string> cells) {
    for (std::string& cell : cells) cell = printable(cell);
    rows_.push_back(std::move(cells));
}

std::string TextTable::render(const std::string& indent) const {
    const std::size_t columns = header_.size();
    std::vector<std::size_t> widths(columns, 0);
    std::vector<bool> numeric(columns, true);
    for (std::size_t c = 0; c < columns; ++c) widths[c] = width(header_[c]);
    for (const auto& row : rows_)
        for (std::size_t c = 0; c < columns && c < row.size(); ++c) {
            widths[c] = std::max(widths[c], width(row[c]));
            if (!row[c].empty() && !looks_numeric(row[c])) numeric[c] = false;
        }

    auto line = [&](const std::vector<std::string>& cells, bool is_header) {
        std::string out = indent;
        for (std::size_t c = 0; c < columns; ++c) {
            const std::string cell = c < cells.size() ? cells[c] : "";
            const std::size_t pad = widths[c] - width(cell);
            const bool right = numeric[c] && !is_header;
            if (right) out.append(pad, ' ');
            out += cell;
            if (!right && c + 1 < columns) out.append(pad, ' ');
            if (c + 1 < columns) out += "  ";
        }
        while (!out.empty() && out.back() == ' ') out.pop_back();
        return out + "\n";
    };

    std::string out = line(header_, true);
    std::string rule = indent;
    for (std::size_t c = 0; c < columns; ++c) rule += std::string(widths[c], '-') + (c + 1 < columns ? "  " : "");
    out += rule + "\n";
    for (const auto& row : rows_) out += line(row, false);
    return out;
}

}  // namespace tune
