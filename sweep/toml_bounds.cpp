#include "sweep/toml_bounds.h"

#include <cctype>
#include <cstdint>

#include <fmt/format.h>

#include "core/config_error.h"

namespace tune {
namespace {

bool digit(char c) { return std::isdigit(static_cast<unsigned char>(c)) != 0; }

// Walks the text outside strings and comments, line by line.
class Scanner {
public:
    Scanner(std::string_view text, const std::string& file) : text_(text), file_(file) {}

    void run() {
        if (text_.size() > kMaxSweepFileBytes)
            fail(1, fmt::format("the file is {} bytes; a sweep file is at most {}", text_.size(), kMaxSweepFileBytes));
        while (i_ < text_.size()) {
            const char c = text_[i_];
            if (c == '\n') {
                new_line();
                ++i_;
            } else if (c == '#') {
                while (i_ < text_.size() && text_[i_] != '\n') ++i_;
            } else if (c == '"' || c == '\'') {
                skip_string(c);
            } else if (c == '[' || c == '{') {
                if (++depth_ > kMaxTomlDepth)
                    fail(line_, fmt::format("arrays, tables and inline tables nest deeper than {}", kMaxTomlDepth));
                ++i_;
            } else if (c == ']' || c == '}') {
                if (depth_ > 0) --depth_;
                ++i_;
            } else if (c == '.') {
                count_dot();
                ++i_;
            } else {
                ++i_;
            }
            if (i_ - line_start_ > kMaxTomlLineBytes)
                fail(line_, fmt::format("the line is longer than {} bytes", kMaxTomlLineBytes));
        }
    }

private:
    [[noreturn]] void fail(std::size_t line, const std::string& why) const {
        throw ConfigError(file_, static_cast<std::uint32_t>(line), 1, fmt::format("{}: not read", why));
    }

    void new_line() {
        ++line_;
        line_start_ = i_ + 1;
        parts_ = 0;
    }

    // A dot inside a number (1.5, or the seconds of a time) is not a key separator; a run of
    // digits and dots with two dots or more (1.2.3) is a dotted key of numbers.
    void count_dot() {
        const bool in_number = i_ > 0 && digit(text_[i_ - 1]) && i_ + 1 < text_.size() && digit(text_[i_ + 1]);
        if (in_number) {
            std::size_t b = i_, e = i_ + 1;
            while (b > 0 && (digit(text_[b - 1]) || text_[b - 1] == '_' || text_[b - 1] == '.')) --b;
            while (e < text_.size() && (digit(text_[e]) || text_[e] == '_' || text_[e] == '.')) ++e;
            int dots = 0;
            for (std::size_t k = b; k < e; ++k) dots += text_[k] == '.';
            if (dots < 2) return;
        }
        if (++parts_ >= kMaxTomlKeyParts)
            fail(line_, fmt::format("a dotted key has more than {} parts", kMaxTomlKeyParts));
    }

    void skip_string(char quote) {
        const bool multi = text_.substr(i_, 3) == std::string(3, quote);
        i_ += multi ? 3 : 1;
        while (i_ < text_.size()) {
            const char c = text_[i_];
            if (c == '\\' && quote == '"') {
                i_ += 2;
                continue;
            }
            if (c == '\n') {
                if (!multi) return;  // an unterminated string: the parser says so
                new_line();
            }
            if (c == quote && (!multi || text_.substr(i_, 3) == std::string(3, quote))) {
                i_ += multi ? 3 : 1;
                return;
            }
            ++i_;
            if (!multi && i_ - line_start_ > kMaxTomlLineBytes)
                fail(line_, fmt::format("the line is longer than {} bytes", kMaxTomlLineBytes));
        }
    }

    std::string_view text_;
    const std::string& file_;
    std::size_t i_ = 0;
    std::size_t line_ = 1;
    std::size_t line_start_ = 0;
    int depth_ = 0;
    int parts_ = 0;
};

}  // namespace

void check_toml_bounds(std::string_view text, const std::string& file) { Scanner(text, file).run(); }

}  // namespace tune
