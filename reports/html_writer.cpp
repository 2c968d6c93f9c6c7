#include "reports/html_writer.h"

#include "reports/html_escape.h"

namespace tune {

void HtmlWriter::start_tag(std::string_view tag, HtmlAttributes attributes) {
    out_ += '<';
    out_ += tag;
    for (const auto& [name, value] : attributes) {
        out_ += ' ';
        out_ += name;
        out_ += "=\"";
        out_ += escape_html(value);
        out_ += '"';
    }
    out_ += '>';
}

HtmlWriter& HtmlWriter::open(std::string_view tag, HtmlAttributes attributes) {
    start_tag(tag, attributes);
    return *this;
}

HtmlWriter& HtmlWriter::close(std::string_view tag) {
    out_ += "</";
    out_ += tag;
    out_ += '>';
    return *this;
}

HtmlWriter& HtmlWriter::empty(std::string_view tag, HtmlAttributes attributes) {
    start_tag(tag, attributes);
    return *this;
}

HtmlWriter& HtmlWriter::text(std::string_view text) {
    out_ += escape_html(text);
    return *this;
}

HtmlWriter& HtmlWriter::element(std::string_view tag, std::string_view text, HtmlAttributes attributes) {
    start_tag(tag, attributes);
    out_ += escape_html(text);
    return close(tag);
}

HtmlWriter& HtmlWriter::raw(std::string_view markup) {
    out_ += markup;
    return *this;
}

}  // namespace tune
