// Escaping of database text for the HTML report.
#include <catch2/catch.hpp>

#include "reports/html_escape.h"

using namespace tune;

TEST_CASE("escape_html turns markup characters into references", "[report]") {
    CHECK(escape_html("<script>alert(1)</script>") == "&lt;script&gt;alert(1)&lt;/script&gt;");
    CHECK(escape_html("a & b \"c\" 'd'") == "a &amp; b &quot;c&quot; &#39;d&#39;");
    CHECK(escape_html("plain text, 80 GiB") == "plain text, 80 GiB");
}

TEST_CASE("sanitize_text replaces invalid UTF-8 and control characters", "[report]") {
    CHECK(sanitize_text("ok \xC3\xA9") == "ok \xC3\xA9");                       // é stays
    CHECK(sanitize_text("bad \xFF byte") == "bad \xEF\xBF\xBD byte");           // stray byte
    CHECK(sanitize_text("cut \xE2\x82") == "cut \xEF\xBF\xBD\xEF\xBF\xBD");     // truncated sequence
    CHECK(sanitize_text("over \xC0\xAF") == "over \xEF\xBF\xBD\xEF\xBF\xBD");   // overlong '/'
    CHECK(sanitize_text(std::string("nul \0 bell \a", 12)) == "nul \xEF\xBF\xBD bell \xEF\xBF\xBD");
    CHECK(sanitize_text("tab\tnewline\n") == "tab\tnewline\n");
    CHECK(sanitize_text("surrogate \xED\xA0\x80") == "surrogate \xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD");
}

TEST_CASE("json_for_script cannot close its element or break a JavaScript parser", "[report]") {
    const nlohmann::json value{{"name", "</script><script>alert(1)</script> & <!-- \xE2\x80\xA8 \xE2\x80\xA9"}};
    const std::string out = json_for_script(value);
    CHECK(out.find('<') == std::string::npos);
    CHECK(out.find('>') == std::string::npos);
    CHECK(out.find('&') == std::string::npos);
    CHECK(out.find("\xE2\x80\xA8") == std::string::npos);
    CHECK(out.find("\xE2\x80\xA9") == std::string::npos);
    CHECK(out.find("\\u2028") != std::string::npos);
    // Still the same JSON.
    CHECK(nlohmann::json::parse(out) == value);
}

TEST_CASE("json_for_script replaces invalid UTF-8 instead of throwing", "[report]") {
    const nlohmann::json value{{"reason", "bad \xFF byte"}};
    const std::string out = json_for_script(value);
    CHECK(nlohmann::json::parse(out)["reason"] == "bad \xEF\xBF\xBD byte");
}
