// Escaping of database text for the HTML report.
#include <catch2/catch.hpp>

#include <fmt/format.h>

#include "reports/html_escape.h"
#include "reports/sha256.h"
#include "reports/text_table.h"

using namespace tune;

TEST_CASE("escape_html turns markup characters into references", "[report]") {
    CHECK(escape_html("<script>alert(1)</script>") == "&lt;script&gt;alert(1)&lt;/script&gt;");
    CHECK(escape_html("a & b \"c\" 'd'") == "a &amp; b &quot;c&quot; &#39;d&#39;");
    CHECK(escape_html("plain text, 80 GiB") == "plain text, 80 GiB");
}

TEST_CASE("sanitize_text replaces invalid UTF-8 and control characters", "[report]") {
    CHECK(sanitize_text("ok \xC3\xA9") == "ok \xC3\xA9");                      // é stays
    CHECK(sanitize_text("bad \xFF byte") == "bad \xEF\xBF\xBD byte");          // stray byte
    CHECK(sanitize_text("cut \xE2\x82") == "cut \xEF\xBF\xBD\xEF\xBF\xBD");    // truncated sequence
    CHECK(sanitize_text("over \xC0\xAF") == "over \xEF\xBF\xBD\xEF\xBF\xBD");  // overlong '/'
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

TEST_CASE("sha256 and base64 match the published test vectors", "[report]") {
    const auto hex = [](const std::array<std::uint8_t, 32>& d) {
        std::string out;
        for (auto b : d) out += fmt::format("{:02x}", b);
        return out;
    };
    CHECK(hex(sha256("")) == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    CHECK(hex(sha256("abc")) == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    CHECK(hex(sha256("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq")) ==
          "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
    CHECK(hex(sha256(std::string(1000000, 'a'))) == "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
    const std::string text = "foobar";
    const auto* bytes = reinterpret_cast<const std::uint8_t*>(text.data());
    CHECK(base64(bytes, 0) == "");
    CHECK(base64(bytes, 1) == "Zg==");
    CHECK(base64(bytes, 2) == "Zm8=");
    CHECK(base64(bytes, 3) == "Zm9v");
    CHECK(base64(bytes, 6) == "Zm9vYmFy");
    CHECK(csp_hash_source("abc") == "'sha256-ungWv48Bz+pBQUDeXa4iI7ADYaOWF3qctBD/YfIAFa0='");
}

TEST_CASE("terminal tables show control characters as hex escapes instead of sending them", "[report]") {
    TextTable table({"name", "note"});
    table.add_row({"evil\x1b]0;owned\x07sweep", "line\nbreak\ttab"});
    const std::string out = table.render();
    CHECK(out.find('\x1b') == std::string::npos);
    CHECK(out.find('\x07') == std::string::npos);
    CHECK_THAT(out, Catch::Contains("evil\\x1b]0;owned\\x07sweep"));
    CHECK_THAT(out, Catch::Contains("line\\x0abreak\\x09tab"));
    CHECK(printable("plain ascii, UTF-8 µs") == "plain ascii, UTF-8 µs");
}
