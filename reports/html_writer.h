// A small builder for the report's markup. Text and attribute values always
// go through escape_html; raw() is for markup this library built itself.
// Every element it opens is closed explicitly, so the output is also easy
// for strict checkers (and the tests) to verify.
#pragma once

#include <initializer_list>
#include <string>
#include <string_view>
#include <utility>

namespace tune {

using HtmlAttributes = std::initializer_list<std::pair<std::string_view, std::string_view>>;

class HtmlWriter {
public:
    HtmlWriter& open(std::string_view tag, HtmlAttributes attributes = {});
    HtmlWriter& close(std::string_view tag);
    // A void element (meta, input, br): no content, no end tag.
    HtmlWriter& empty(std::string_view tag, HtmlAttributes attributes = {});
    HtmlWriter& text(std::string_view text);
    // <tag ...>text</tag>
    HtmlWriter& element(std::string_view tag, std::string_view text, HtmlAttributes attributes = {});
    HtmlWriter& raw(std::string_view markup);

    std::string& str() { return out_; }
    std::string take() { return std::move(out_); }

private:
    void start_tag(std::string_view tag, HtmlAttributes attributes);
    std::string out_;
};

}  // namespace tune
