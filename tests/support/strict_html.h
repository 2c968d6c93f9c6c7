// A strict check of the markup the report writes: every element opened is
// closed in order (void elements excepted), attribute values are double-quoted,
// text holds no raw '<' and every '&' starts a character reference, and
// <script>/<style> end where they should. Stricter than HTML requires, so that
// text from the database cannot hide as markup in the page.
#pragma once

#include <algorithm>
#include <cctype>
#include <set>
#include <string>
#include <string_view>
#include <vector>

namespace tune::test {

struct HtmlCheck {
    bool ok = true;
    std::string error;                  // the first problem, with its offset
    std::vector<std::string> elements;  // every start tag's name, in order
};

namespace strict_html_detail {

inline std::string lower(std::string_view s) {
    std::string out(s);
    std::transform(out.begin(), out.end(), out.begin(),
                   [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    return out;
}

inline bool valid_reference(std::string_view text, std::size_t at) {
    const std::size_t end = text.find(';', at);
    if (end == std::string_view::npos || end - at > 10) return false;
    const std::string_view name = text.substr(at + 1, end - at - 1);
    static const std::set<std::string_view> named{"amp", "lt", "gt", "quot", "#39", "nbsp"};
    if (named.count(name)) return true;
    if (name.size() >= 2 && name[0] == '#')
        return std::all_of(name.begin() + 1, name.end(), [](unsigned char c) { return std::isdigit(c); });
    return false;
}

class Checker {
public:
    explicit Checker(std::string_view html) : html_(html) {}

    HtmlCheck run() {
        std::size_t i = 0;
        if (html_.substr(0, 15) != "<!DOCTYPE html>") return fail(0, "no <!DOCTYPE html> first");
        i = 15;
        while (result_.ok && i < html_.size()) i = html_[i] == '<' ? tag(i) : text(i);
        if (result_.ok && !stack_.empty()) fail(html_.size(), "unclosed <" + stack_.back() + ">");
        return result_;
    }

private:
    HtmlCheck fail(std::size_t at, const std::string& what) {
        if (result_.ok) {
            result_.ok = false;
            result_.error = what + " at offset " + std::to_string(at) +
                            " near: " + std::string(html_.substr(at > 60 ? at - 60 : 0, 120));
        }
        return result_;
    }

    std::size_t text(std::size_t i) {
        const std::size_t end = std::min(html_.find('<', i), html_.size());
        for (std::size_t k = i; k < end; ++k)
            if (html_[k] == '&' && !valid_reference(html_, k)) {
                fail(k, "bare '&' in text");
                return html_.size();
            }
        return end;
    }

    std::size_t tag(std::size_t i) {
        if (html_.substr(i, 4) == "<!--") {
            const std::size_t end = html_.find("-->", i);
            return end == std::string_view::npos ? (fail(i, "unclosed comment"), html_.size()) : end + 3;
        }
        const bool closing = html_.substr(i, 2) == "</";
        std::size_t k = i + (closing ? 2 : 1);
        const std::size_t name_start = k;
        while (k < html_.size() && (std::isalnum(static_cast<unsigned char>(html_[k])))) ++k;
        const std::string name = lower(html_.substr(name_start, k - name_start));
        if (name.empty()) return fail(i, "'<' that starts no tag"), html_.size();
        if (closing) return end_tag(i, k, name);
        k = attributes(k);
        if (!result_.ok) return html_.size();
        result_.elements.push_back(name);
        static const std::set<std::string> void_elements{"meta", "input", "br", "hr", "img", "link", "col", "wbr"};
        if (void_elements.count(name)) return k;
        if (name == "script" || name == "style") return raw_text(k, name);
        stack_.push_back(name);
        return k;
    }

    std::size_t end_tag(std::size_t i, std::size_t k, const std::string& name) {
        if (k >= html_.size() || html_[k] != '>') return fail(i, "malformed end tag"), html_.size();
        if (stack_.empty() || stack_.back() != name)
            return fail(i,
                        "</" + name + "> closes <" + (stack_.empty() ? std::string("nothing") : stack_.back()) + ">"),
                   html_.size();
        stack_.pop_back();
        return k + 1;
    }

    // name="value" pairs up to '>'; values double-quoted, no '<' inside them.
    std::size_t attributes(std::size_t k) {
        while (k < html_.size()) {
            while (k < html_.size() && html_[k] == ' ') ++k;
            if (k < html_.size() && html_[k] == '>') return k + 1;
            const std::size_t start = k;
            while (k < html_.size() && (std::isalnum(static_cast<unsigned char>(html_[k])) || html_[k] == '-')) ++k;
            if (k == start) return fail(k, "bad attribute name"), html_.size();
            if (html_.substr(k, 2) != "=\"") return fail(k, "attribute value not double-quoted"), html_.size();
            const std::size_t close = html_.find('"', k + 2);
            if (close == std::string_view::npos) return fail(k, "unterminated attribute"), html_.size();
            const std::string_view value = html_.substr(k + 2, close - k - 2);
            if (value.find('<') != std::string_view::npos) return fail(k, "'<' in an attribute value"), html_.size();
            for (std::size_t a = 0; a < value.size(); ++a)
                if (value[a] == '&' && !valid_reference(value, a))
                    return fail(k, "bare '&' in an attribute"), html_.size();
            k = close + 1;
        }
        return fail(k, "unterminated tag"), html_.size();
    }

    std::size_t raw_text(std::size_t k, const std::string& name) {
        const std::string end = "</" + name + ">";
        const std::string rest = lower(html_.substr(k));
        const std::size_t close = rest.find(end);
        if (close == std::string::npos) return fail(k, "unclosed <" + name + ">"), html_.size();
        const std::string body = rest.substr(0, close);
        if (body.find("<!--") != std::string::npos) return fail(k, "'<!--' inside <" + name + ">"), html_.size();
        return k + close + end.size();
    }

    std::string_view html_;
    std::vector<std::string> stack_;
    HtmlCheck result_;
};

}  // namespace strict_html_detail

inline HtmlCheck check_strict_html(std::string_view html) { return strict_html_detail::Checker(html).run(); }

}  // namespace tune::test
