// The HTML report in a real browser (headless Debian Chromium): it loads from
// a file, draws every chart, logs nothing to the console, records no error,
// fetches nothing, and hostile sweep text stays text. Screenshots land in
// <build>/artifacts/ for people (and CI) to look at.
#include <catch2/catch.hpp>

#include <regex>
#include <tuple>

#include "reports/html_report.h"
#include "store/store.h"
#include "tests/support/headless_chromium.h"
#include "tests/support/report_files.h"
#include "tests/support/tiny_report_fixture.h"

using namespace tune;

namespace {

void require_chromium() {
    if (test::chromium_path().empty())
        FAIL(
            "headless Chromium is needed for the browser tests and was not found at /usr/bin/chromium "
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
    std::ofstream(page)
        << "<!DOCTYPE html><html><body><img src=\"http://127.0.0.1:9/x.png\">"
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

namespace {

// The cells of the DOM's <table id="id">: per body row, each <td>'s text and data-sort. The last
// table of that id: a paged table's <noscript> copy comes first, as text.
struct DomCell {
    std::string text;
    std::string sort;
};
std::vector<std::vector<DomCell>> dom_rows(const std::string& dom, const std::string& id) {
    const std::size_t at = dom.rfind("id=\"" + id + "\"");
    if (at == std::string::npos) return {};
    const std::size_t body = dom.find("<tbody>", at);
    const std::string rows = dom.substr(body, dom.find("</tbody>", body) - body);
    static const std::regex tr(R"(<tr>(.*?)</tr>)"), td(R"(<td([^>]*)>(.*?)</td>)"), sort(R"(data-sort="([^"]*)\")");
    std::vector<std::vector<DomCell>> out;
    for (std::sregex_iterator r(rows.begin(), rows.end(), tr), end; r != end; ++r) {
        const std::string row = (*r)[1];
        std::vector<DomCell> cells;
        for (std::sregex_iterator c(row.begin(), row.end(), td); c != end; ++c) {
            std::smatch m;
            const std::string attributes = (*c)[1];
            cells.push_back({(*c)[2], std::regex_search(attributes, m, sort) ? m[1].str() : ""});
        }
        out.push_back(std::move(cells));
    }
    return out;
}

// The column titled `title` in the DOM's <table id="id"> (its sort button's text).
std::size_t dom_column(const std::string& dom, const std::string& id, const std::string& title) {
    const std::size_t at = dom.rfind("id=\"" + id + "\"");
    const std::string head = dom.substr(at, dom.find("</thead>", at) - at);
    static const std::regex th(R"(<th[^>]*>(.*?)</th>)"), tags(R"(<[^>]*>)");
    std::size_t column = 0;
    for (std::sregex_iterator it(head.begin(), head.end(), th), end; it != end; ++it, ++column)
        if (std::regex_replace((*it)[1].str(), tags, "") == title) return column;
    FAIL("no column " << title << " in " << id);
    return 0;
}

long body_number(const std::string& dom, const std::string& name) {
    const std::string v = test::body_attribute(dom, name);
    INFO(name);
    REQUIRE(!v.empty());
    return std::stol(v);
}

}  // namespace

TEST_CASE("the polished report in Chromium: what to run first, a readable trials table, scaled units, risks flagged",
          "[browser]") {
    require_chromium();
    const auto dir = test::report_scratch_dir("browser-polish");
    const Store tiny(test::tiny_fixture_db(dir), Store::Mode::read_only);
    const Store fixture(test::report_fixture_db(dir), Store::Mode::read_only);
    const std::vector<std::tuple<std::string, const Store*, std::string>> reports{{"tiny", &tiny, "tiny-demo"},
                                                                                  {"h100", &fixture, "h100-demo"}};
    for (const auto& [name, db, sweep] : reports) {
        INFO(name);
        const auto page = dir / ("polish-" + name + ".html");
        write_html_report(*db, std::vector<std::string>{sweep}, page);
        // #measure: the page records its layout and sorts the trials by tokens/s.
        const test::BrowserRun run = test::load_page(page, dir / ("run-" + name), "#measure", "1400,900");
        INFO("browser log:\n" << run.log);
        REQUIRE(run.exit_code == 0);
        CHECK(test::body_attribute(run.dom, "data-report-ready") == "1");
        CHECK(test::body_attribute(run.dom, "data-errors") == "0");

        // What to run opens the page.
        const std::size_t main = run.dom.find("<main>");
        CHECK(run.dom.find("<section id=\"what-to-run\">", main) == run.dom.find("<section", main));
        CHECK(!dom_rows(run.dom, "s0-what-to-run-table").empty());

        // Every trials row is one line, and the reason column ends inside the window.
        CHECK(body_number(run.dom, "data-trials-row-px") <= 40);
        CHECK(body_number(run.dom, "data-reason-right-px") <= body_number(run.dom, "data-window-px"));

        // Sorted by tokens/s ("842" before "1.20K"): by the cells' numbers, not their text.
        const auto rows = dom_rows(run.dom, "s0-trials-table");
        REQUIRE(rows.size() > 10);
        const std::size_t rate = dom_column(run.dom, "s0-trials-table", "tokens/s");
        double last = -1;
        std::size_t sorted = 0;
        for (const auto& row : rows) {
            if (row[rate].sort.empty()) continue;
            const double v = std::stod(row[rate].sort);
            CHECK(v >= last);
            last = v;
            ++sorted;
        }
        CHECK(sorted > 10);

        // Units scale; no exact row among the worst estimates.
        CHECK(run.dom.find(">0.00<") == std::string::npos);
        const std::size_t error = dom_column(run.dom, "s0-worst-table", "error");
        for (const auto& row : dom_rows(run.dom, "s0-worst-table")) CHECK(row[error].text != "+0.0%");
    }
    // The tiny model reads MiB, and its pure bf16 recommendations carry the risk.
    const auto page = dir / "polish-tiny.html";
    const test::BrowserRun run = test::load_page(page, dir / "run-tiny-again");
    REQUIRE(run.exit_code == 0);
    const auto front = dom_rows(run.dom, "s0-front-table");
    REQUIRE(!front.empty());
    const std::size_t peak = dom_column(run.dom, "s0-front-table", "peak");
    const std::size_t note = dom_column(run.dom, "s0-front-table", "note");
    const std::size_t precision = dom_column(run.dom, "s0-front-table", "precision");
    for (const auto& row : front) {
        CHECK_THAT(row[peak].text, Catch::EndsWith(" MiB") || Catch::EndsWith(" KiB"));
        CHECK((row[note].text == "convergence risk") == (row[precision].text == "bf16"));
    }
}
