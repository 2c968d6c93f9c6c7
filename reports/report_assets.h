// Browser code and style inlined into every HTML report, embedded at build
// time by embed_assets.cmake (Chart.js comes from Debian's libjs-chart.js).
#pragma once

#include <string_view>

namespace tune::report_assets {

extern const std::string_view chart_js;   // Chart.js 3.x, minified UMD build
extern const std::string_view boot_js;    // runs first: records errors into the page
extern const std::string_view report_js;  // tables (sort, filter, pages) and charts
extern const std::string_view report_css;

}  // namespace tune::report_assets
