// Making text from the database safe to put into an HTML report. Everything a
// sweep file or a trial wrote (names, hosts, reasons, model names) goes
// through one of these; nothing from the store is ever written raw.
#pragma once

#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace tune {

// Valid UTF-8 with no control characters but tab, newline and carriage return:
// invalid bytes and other controls become U+FFFD, so the page parses the same
// in every browser and the JSON encoder never throws.
std::string sanitize_text(std::string_view text);

// Text content or a double-quoted attribute value: & < > " ' escaped.
std::string escape_html(std::string_view text);

// JSON for a <script type="application/json"> element. Besides the JSON
// escapes, < > & and U+2028/U+2029 become \uXXXX so no string can close the
// element, open a comment, or break a JavaScript parser that reads it.
std::string json_for_script(const nlohmann::json& value);

}  // namespace tune
