// The HTML report over the fixture database: well-formed, self-contained,
// every section present with the store's numbers, hostile text inert.
#include <catch2/catch.hpp>

#include <map>
#include <regex>

#include "reports/html_report.h"
#include "reports/sweep_data.h"
#include "store/store.h"
#include "tests/support/report_files.h"
#include "tests/support/run_command.h"
#include "tests/support/strict_html.h"
#include "tests/support/tiny_report_fixture.h"

using namespace tune;

namespace {

std::string report_of(const Store& db, std::vector<std::string> sweeps) { return html_report(db, sweeps); }

// The rows of <table id="id">: the number of "<tr>" between its <tbody> and </tbody>.
std::size_t table_rows(const std::string& html, const std::string& id) {
    const std::size_t at = html.find("id=\"" + id + "\"");
    if (at == std::string::npos) return 0;
    const std::size_t body = html.find("<tbody>", at);
    const std::size_t end = html.find("</tbody>", body);
    return test::count_of(html.substr(body, end - body), "<tr>");
}

std::string embedded_json(const std::string& html) {
    const std::string open = "<script type=\"application/json\" id=\"report-data\">";
    const std::size_t start = html.find(open);
    REQUIRE(start != std::string::npos);
    const std::size_t end = html.find("</script>", start);
    return html.substr(start + open.size(), end - start - open.size());
}

// Every src= or href= value in the page.
std::vector<std::string> references(const std::string& html) {
    std::vector<std::string> out;
    static const std::regex ref(R"((?:src|href)="([^"]*)\")");
    // Only the markup, not the embedded scripts (Chart.js mentions URLs in strings).
    std::string markup = html.substr(0, html.find("<script type=\"application/json\""));
    for (std::sregex_iterator it(markup.begin(), markup.end(), ref), end; it != end; ++it) out.push_back((*it)[1]);
    return out;
}

}  // namespace

TEST_CASE("the HTML report of one sweep is well-formed and has every section", "[report]") {
    const auto dir = test::report_scratch_dir("html-one");
    const Store db(test::report_fixture_db(dir), Store::Mode::read_only);
    const std::string html = report_of(db, {"h100-demo"});
    const SweepData sweep = load_sweep_data(db, "h100-demo");

    const auto check = test::check_strict_html(html);
    INFO(check.error);
    REQUIRE(check.ok);

    for (const char* id :
         {"overview", "funnel", "s0-pareto", "s0-front-table", "s0-breakdown", "s0-accuracy", "s0-effects", "s0-trials",
          "s0-trials-table", "s0-pareto-chart", "s0-breakdown-chart", "s0-accuracy-memory", "s0-accuracy-step",
          "s0-accuracy-histogram", "s0-effect-tokens-checkpointing", "s0-effect-memory-optimizer"})
        CHECK(html.find(std::string("id=\"") + id + "\"") != std::string::npos);

    // The header carries where and with what it ran.
    CHECK(html.find("NVIDIA H100 80GB HBM3") != std::string::npos);
    CHECK(html.find("gpu-node-01") != std::string::npos);
    CHECK(html.find("CUDA 12.4, NCCL 2.21.5, driver 550.54.15") != std::string::npos);
    // Every trial is in the table, the front table has the front.
    CHECK(table_rows(html, "s0-trials-table") == sweep.trials.size());
    CHECK(table_rows(html, "s0-front-table") == sweep.front.size());
    // Funnel counts from the store.
    CHECK(html.find("<span class=\"funnel-count\">" + std::to_string(sweep.summary.total()) + "</span>") !=
          std::string::npos);
    CHECK(html.find("<span class=\"funnel-count\">" + std::to_string(sweep.summary.count(TrialStatus::oom)) +
                    "</span>") != std::string::npos);
}

TEST_CASE("the HTML report is self-contained and fetches nothing", "[report]") {
    const auto dir = test::report_scratch_dir("html-csp");
    const Store db(test::report_fixture_db(dir), Store::Mode::read_only);
    const std::string html = report_of(db, {"h100-demo"});

    // The policy is in <head> before any script, and forbids every fetch.
    const std::size_t csp = html.find("http-equiv=\"Content-Security-Policy\"");
    REQUIRE(csp != std::string::npos);
    CHECK(csp < html.find("<script"));
    CHECK(report_content_security_policy().find("default-src 'none'") != std::string::npos);
    CHECK(report_content_security_policy().find("connect-src 'none'") != std::string::npos);
    // Scripts by hash only: no 'unsafe-inline' for them.
    const std::string policy = report_content_security_policy();
    const std::string scripts = policy.substr(policy.find("script-src"),
                                              policy.find(';', policy.find("script-src")) - policy.find("script-src"));
    CHECK(test::count_of(scripts, "'sha256-") == 3);
    CHECK(scripts.find("unsafe") == std::string::npos);
    // No external resources: the only references are in-page anchors.
    for (const auto& ref : references(html)) CHECK(ref.rfind("#", 0) == 0);
    CHECK(html.find("<link") == std::string::npos);
    CHECK(html.find("<script src") == std::string::npos);
    // Chart.js is inline.
    CHECK(html.find("Chart.js v3.9.1") != std::string::npos);
}

TEST_CASE("the embedded chart data is JSON that cannot close its element", "[report]") {
    const auto dir = test::report_scratch_dir("html-json");
    const Store db(test::report_fixture_db(dir), Store::Mode::read_only);
    const std::string html = report_of(db, {"h100-demo", "a100-demo"});
    const std::string json = embedded_json(html);
    CHECK(json.find('<') == std::string::npos);
    const auto data = nlohmann::json::parse(json);
    const auto& charts = data.at("charts");
    CHECK(html.find("data-charts=\"" + std::to_string(charts.size()) + "\"") != std::string::npos);
    for (const auto& c : charts)
        CHECK(html.find("<canvas id=\"" + c.at("id").get<std::string>() + "\"") != std::string::npos);
    // The Pareto chart carries the memory limit and the front.
    const auto pareto =
        std::find_if(charts.begin(), charts.end(), [](const auto& c) { return c["id"] == "s0-pareto-chart"; });
    REQUIRE(pareto != charts.end());
    CHECK((*pareto)["limits"][0]["x"].get<double>() == Approx(80.0));
    CHECK((*pareto)["fronts"][0]["points"].size() == load_sweep_data(db, "h100-demo").front.size());
}

TEST_CASE("a comparison report has both fronts and the deltas of shared configurations", "[report]") {
    const auto dir = test::report_scratch_dir("html-compare");
    const Store db(test::report_fixture_db(dir), Store::Mode::read_only);
    const std::string html = report_of(db, {"h100-demo", "a100-demo"});
    const auto check = test::check_strict_html(html);
    INFO(check.error);
    REQUIRE(check.ok);
    CHECK(html.find("id=\"cmp1-comparison\"") != std::string::npos);
    CHECK(html.find("id=\"cmp1-fronts-chart\"") != std::string::npos);
    CHECK(table_rows(html, "cmp1-delta-table") == load_sweep_data(db, "h100-demo").trials.size());
    // Both sweeps get their own sections too.
    CHECK(html.find("id=\"s0-trials\"") != std::string::npos);
    CHECK(html.find("id=\"s1-trials\"") != std::string::npos);
    CHECK(html.find("NVIDIA A100-SXM4-40GB") != std::string::npos);
}

TEST_CASE("a hostile sweep's names and trial fields render as text", "[report]") {
    const auto dir = test::report_scratch_dir("html-hostile");
    const Store db(test::report_fixture_db(dir), Store::Mode::read_only);
    const std::string html = report_of(db, {"<script>alert(1)</script>", "h100-demo"});

    const auto check = test::check_strict_html(html);
    INFO(check.error);
    REQUIRE(check.ok);
    // Exactly the page's own four scripts: boot, data, Chart.js, report.
    CHECK(test::count_of(html, "<script") == 4);
    const std::size_t elements_before = check.elements.size();
    CHECK(std::count(check.elements.begin(), check.elements.end(), "img") == 0);
    CHECK(std::count(check.elements.begin(), check.elements.end(), "svg") == 0);
    CHECK(std::count(check.elements.begin(), check.elements.end(), "iframe") == 0);
    CHECK(elements_before > 0);
    // The text is there, escaped.
    CHECK(html.find("&lt;script&gt;alert(1)&lt;/script&gt;") != std::string::npos);
    CHECK(html.find("&quot;&gt;&lt;img src=x onerror=alert(2)&gt;") != std::string::npos);
    CHECK(html.find("&lt;svg onload=alert(4)&gt;") != std::string::npos);
    CHECK(html.find("&lt;b&gt;bold&lt;/b&gt; &amp;") != std::string::npos);
    CHECK(html.find("alert(1)</script>") == std::string::npos);
    // In the chart data it is JSON-escaped.
    CHECK(embedded_json(html).find("\\u003cscript\\u003ealert(1)") != std::string::npos);
}

TEST_CASE("an HTML parser (xmllint) reads the report without errors", "[report]") {
    if (test::run_command("command -v xmllint >/dev/null 2>&1").exit_code != 0) {
        WARN("xmllint not installed (Debian libxml2-utils; scripts/install-deps.sh installs it): check skipped");
        return;
    }
    const auto dir = test::report_scratch_dir("html-xmllint");
    const Store db(test::report_fixture_db(dir), Store::Mode::read_only);
    const auto path = dir / "report.html";
    const std::vector<std::string> sweeps{"h100-demo", "<script>alert(1)</script>"};
    write_html_report(db, sweeps, path);
    const auto result = test::run_command("xmllint --html --noout '" + path.string() + "' 2>&1");
    // libxml2's HTML parser predates HTML5 and names its newer elements; anything else is an error.
    static const std::regex error_line(R"(: HTML parser error : (.*))");
    static const std::regex html5_tag(R"(Tag (section|article|header|nav|main|figure|figcaption|canvas) invalid)");
    std::size_t errors = 0;
    std::istringstream lines(result.output);
    for (std::string line; std::getline(lines, line);) {
        std::smatch m;
        if (!std::regex_search(line, m, error_line)) continue;
        const std::string what = m[1];
        if (std::regex_match(what, html5_tag)) continue;
        ++errors;
        UNSCOPED_INFO(line);
    }
    CHECK(errors == 0);
}

TEST_CASE("write_html_report replaces the file whole and reports unwritable paths", "[report]") {
    const auto dir = test::report_scratch_dir("html-write");
    const Store db(test::report_fixture_db(dir), Store::Mode::read_only);
    const auto path = dir / "r.html";
    const std::vector<std::string> sweeps{"a100-demo"};
    write_html_report(db, sweeps, path);
    const std::string html = test::read_text_file(path);
    CHECK(html.rfind("<!DOCTYPE html>", 0) == 0);
    CHECK(html.find("</html>") != std::string::npos);
    CHECK(!std::filesystem::exists(dir / "r.html.tmp"));
    CHECK_THROWS(write_html_report(db, sweeps, dir / "missing-dir" / "r.html"));
}

TEST_CASE("a CPU sweep's charts show what differs: the limit above the baseline, bars without it", "[report][charts]") {
    const auto dir = test::report_scratch_dir("html-cpu-charts");
    const Store db(test::tiny_fixture_db(dir, 170 * MiB), Store::Mode::read_only);  // the demo's baseline
    const SweepData sweep = load_sweep_data(db, "tiny-demo");
    const auto data = nlohmann::json::parse(embedded_json(report_of(db, {"tiny-demo"})));
    const auto chart = [&](const std::string& id) {
        for (const auto& c : data.at("charts"))
            if (c["id"] == id) return c;
        FAIL("no chart " << id);
        return nlohmann::json();
    };
    // The limit bounds what the trainer allocates; the peaks drawn also hold the process's baseline.
    const auto limit = chart("s0-pareto-chart")["limits"][0];
    const std::uint64_t baseline = 170 * MiB;
    CHECK_THAT(limit["label"].get<std::string>(), Catch::Contains("drawn above the process's baseline of"));
    const std::map<std::string, double> unit{{"B", 1.0}, {"KiB", 1024.0}, {"MiB", 1048576.0}, {"GiB", 1073741824.0}};
    const double drawn = limit["x"].get<double>() * unit.at(chart("s0-pareto-chart")["x_unit"].get<std::string>());
    CHECK(drawn == Approx(static_cast<double>(sweep.memory_limit + baseline)).epsilon(0.01));
    // The breakdown's bars leave the baseline out (the table keeps it).
    for (const auto& s : chart("s0-breakdown-chart")["series"]) CHECK(s["component"] != "overhead");
    CHECK(report_of(db, {"tiny-demo"}).find("The bars leave out the overhead") != std::string::npos);
}
