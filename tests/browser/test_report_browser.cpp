// The HTML report in a real browser (headless Debian Chromium): it loads from
// a file, draws every chart, logs nothing to the console, records no error,
// fetches nothing, and hostile sweep text stays text. Screenshots land in
// <build>/artifacts/ for people (and CI) to look at.
#include <catch2/catch.hpp>

#include "reports/html_report.h"
#include "store/store.h"
#include "tests/support/headless_chromium.h"
#include "tests/support/report_files.h"

using namespace tune;

namespace {

void require_chromium() {
    if (test::chromium_path().empty())
        FAIL("headless Chromium is needed for the browser tests and was not found at /usr/bin/chromium "
             "(install it with scripts/install-deps.sh --with-test-extras, or set TUNE_CHROMIUM)");
}

std::filesystem::path artifacts_dir() {
    const auto dir = std::filesystem::path(TUNE_BUILD_DIR) / "artifacts";
    std::filesystem::create_directories(dir);
    return dir;
}

void check_page_in_browser(const std::filesystem::path& page, const std::filesystem::path& work) {
    const test::BrowserRun run = test::load_page(page, work);
    INFO("page " << page.string() << "\nbrowser log:\n" << run.log);
    REQUIRE(run.exit_code == 0);
    // Scripts ran to the end and every chart drew.
    CHECK(test::body_attribute(run.dom, "data-report-ready") == "1");
    const std::string charts = test::body_attribute(run.dom, "data-charts");
    CHECK(!charts.empty());
    CHECK(charts != "0");
    CHECK(test::body_attribute(run.dom, "data-charts-drawn") == charts);
    // Nothing went wrong: no error recorded by the page, no console message at all.
    CHECK(test::body_attribute(run.dom, "data-errors") == "0");
    CHECK(run.dom.find("<pre id=\"report-errors\" class=\"errors\" hidden=\"\"></pre>") != std::string::npos);
    CHECK(run.log.find(":CONSOLE") == std::string::npos);
    // And the page requested nothing from the network.
    const auto requests = test::page_requests(run.netlog);
    for (const auto& url : requests) UNSCOPED_INFO("page requested " << url);
    CHECK(requests.empty());
}

}  // namespace

TEST_CASE("the browser checks notice console errors and page requests (control page)", "[browser]") {
    require_chromium();
    const auto dir = test::report_scratch_dir("browser-control");
    const auto page = dir / "control.html";
    std::ofstream(page) << "<!DOCTYPE html><html><body><img src=\"http://127.0.0.1:9/x.png\">"
                           "<script>console.error('control'); fetch('http://127.0.0.1:9/y').catch(function(){});</script>"
                           "</body></html>";
    const test::BrowserRun run = test::load_page(page, dir / "run");
    REQUIRE(run.exit_code == 0);
    CHECK(run.log.find(":CONSOLE") != std::string::npos);
    CHECK(test::page_requests(run.netlog).size() >= 2);
}

TEST_CASE("reports load in Chromium with every chart drawn, no errors and no requests", "[browser]") {
    require_chromium();
    const auto dir = test::report_scratch_dir("browser-reports");
    const Store db(test::report_fixture_db(dir), Store::Mode::read_only);
    const std::vector<std::pair<std::string, std::vector<std::string>>> reports{
        {"one", {"h100-demo"}},
        {"compare", {"h100-demo", "a100-demo"}},
        {"hostile", {"<script>alert(1)</script>", "h100-demo"}}};
    for (const auto& [name, sweeps] : reports) {
        const auto page = dir / ("report-" + name + ".html");
        write_html_report(db, sweeps, page);
        check_page_in_browser(page, dir / ("run-" + name));
    }
}

TEST_CASE("hostile text stays text in the browser's DOM", "[browser]") {
    require_chromium();
    const auto dir = test::report_scratch_dir("browser-hostile");
    const Store db(test::report_fixture_db(dir), Store::Mode::read_only);
    const auto page = dir / "hostile.html";
    const std::vector<std::string> sweeps{"<script>alert(1)</script>"};
    write_html_report(db, sweeps, page);
    const test::BrowserRun run = test::load_page(page, dir / "run");
    REQUIRE(run.exit_code == 0);
    // The DOM Chromium built has none of the injected elements, and shows the names as text.
    CHECK(run.dom.find("<img") == std::string::npos);
    CHECK(run.dom.find("<svg") == std::string::npos);
    CHECK(run.dom.find("<iframe") == std::string::npos);
    CHECK(run.dom.find("&lt;script&gt;alert(1)&lt;/script&gt;") != std::string::npos);
    CHECK(test::count_of(run.dom, "<script") == 4);
    CHECK(test::body_attribute(run.dom, "data-errors") == "0");
}

TEST_CASE("screenshots of the reports are saved as build artifacts", "[browser]") {
    require_chromium();
    const auto dir = test::report_scratch_dir("browser-screenshots");
    const Store db(test::report_fixture_db(dir), Store::Mode::read_only);
    const std::vector<std::pair<std::string, std::vector<std::string>>> reports{
        {"one", {"h100-demo"}}, {"compare", {"h100-demo", "a100-demo"}}};
    for (const auto& [name, sweeps] : reports) {
        const auto page = artifacts_dir() / ("report-" + name + ".html");
        write_html_report(db, sweeps, page);
        const auto png = artifacts_dir() / ("report-" + name + ".png");
        std::filesystem::remove(png);
        REQUIRE(test::screenshot(page, png, dir / ("shot-" + name), 1400, 4200) == 0);
        const std::string bytes = test::read_text_file(png);
        CHECK(bytes.rfind("\x89PNG", 0) == 0);
        CHECK(bytes.size() > 50'000);  // a drawn page, not a blank one
    }
}
