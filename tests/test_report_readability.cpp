// What makes the reports readable at a glance: numbers scale with their size,
// a "what to run" panel opens the report, the all-trials table stays
// readable, "worst estimates" lists no exact rows, pure bf16 is flagged
// wherever it is recommended, and docs/commands.md defines every precision name.
#include <catch2/catch.hpp>

#include <algorithm>
#include <fstream>
#include <regex>

#include <nlohmann/json.hpp>

#include "core/convergence_risk.h"
#include "exports/framework.h"
#include "reports/html_report.h"
#include "reports/report_format.h"
#include "reports/text_report.h"
#include "reports/what_to_run.h"
#include "store/store.h"
#include "tests/support/report_files.h"
#include "tests/support/run_command.h"
#include "tests/support/tiny_report_fixture.h"

using namespace tune;

namespace {

// The markup of <table id="id"> (empty when absent).
std::string table_html(const std::string& html, const std::string& id) {
    const std::size_t at = html.find("<table class=\"data\" id=\"" + id + "\"");
    const std::size_t interactive = html.find("<table class=\"data interactive\" id=\"" + id + "\"");
    const std::size_t from = std::min(at, interactive);
    if (from == std::string::npos) return "";
    return html.substr(from, html.find("</table>", from) - from);
}

// The rows of a table's body, each as its <td> cells' markup.
std::vector<std::vector<std::string>> body_rows(const std::string& table) {
    std::vector<std::vector<std::string>> rows;
    const std::string body = table.substr(table.find("<tbody>"));
    static const std::regex row(R"(<tr>(.*?)</tr>)"), cell(R"(<td([^>]*)>(.*?)</td>)");
    for (std::sregex_iterator r(body.begin(), body.end(), row), end; r != end; ++r) {
        const std::string tr = (*r)[1];
        std::vector<std::string> cells;
        for (std::sregex_iterator c(tr.begin(), tr.end(), cell); c != end; ++c) cells.push_back((*c)[0]);
        rows.push_back(std::move(cells));
    }
    return rows;
}

// A cell's text (no markup inside cells but the escapes).
std::string cell_text(const std::string& td) {
    const std::size_t open = td.find('>') + 1;
    return td.substr(open, td.rfind("</td>") - open);
}

std::vector<std::string> header_titles(const std::string& table) {
    std::vector<std::string> out;
    static const std::regex th(R"(<th[^>]*>([^<]*)</th>)");
    const std::string head = table.substr(0, table.find("</thead>"));
    for (std::sregex_iterator it(head.begin(), head.end(), th), end; it != end; ++it) out.push_back((*it)[1]);
    return out;
}

std::size_t column_of(const std::string& table, const std::string& title) {
    const auto titles = header_titles(table);
    const auto it = std::find(titles.begin(), titles.end(), title);
    REQUIRE(it != titles.end());
    return static_cast<std::size_t>(it - titles.begin());
}

nlohmann::json chart(const std::string& html, const std::string& id) {
    const std::string open = "<script type=\"application/json\" id=\"report-data\">";
    const std::size_t start = html.find(open) + open.size();
    const auto data = nlohmann::json::parse(html.substr(start, html.find("</script>", start) - start));
    for (const auto& c : data["charts"])
        if (c["id"] == id) return c;
    FAIL("no chart " << id);
    return {};
}

std::string read_file(const std::filesystem::path& p) { return test::read_text_file(p); }

}  // namespace

TEST_CASE("numbers scale with their size: bytes, counts and throughput", "[report][units]") {
    CHECK(bytes_text(512) == "512 B");
    CHECK(bytes_text(5 * KiB / 2) == "2.50 KiB");
    CHECK(bytes_text(5 * MiB / 2) == "2.50 MiB");
    CHECK(bytes_text(38 * GiB) == "38.00 GiB");
    CHECK(count_text(512) == "512");
    CHECK(count_text(296'000) == "296K");
    CHECK(count_text(1'234'567) == "1.23M");
    CHECK(count_text(6'738'415'616.0) == "6.74B");
    CHECK(count_text(999'999) == "1.00M");  // rounding moves it up a unit, never "1000K"
    CHECK(throughput_text(0.8421) == "0.842");
    CHECK(throughput_text(84.21) == "84.2");
    CHECK(throughput_text(842.1) == "842");
    CHECK(throughput_text(12'345) == "12.3K");
    CHECK(throughput_text(1'234'567) == "1.23M");
    CHECK(seconds_text(0.4121) == "0.412");
    CHECK(seconds_text(0.001234) == "0.00123");
    CHECK(seconds_text(12.34) == "12.3");
    CHECK(byte_unit_for(5 * MiB / 2).name == "MiB");
    CHECK(byte_unit_for(80 * GiB).name == "GiB");
    CHECK(byte_unit_for(100).name == "B");
    CHECK(in_unit(5 * MiB / 2, byte_unit_for(5 * MiB / 2)) == Approx(2.5));
}

TEST_CASE("a tiny model's report reads MiB and K parameters, never 0.00", "[report][units]") {
    const auto dir = test::report_scratch_dir("polish-units");
    const Store db(test::tiny_fixture_db(dir), Store::Mode::read_only);
    const std::string html = html_report(db, std::vector<std::string>{"tiny-demo"});
    const SweepData sweep = load_sweep_data(db, "tiny-demo");
    const ModelSpec& m = sweep.trials.front().result.config.model;

    CHECK(html.find("(" + count_text(static_cast<double>(m.param_count())) + " parameters") != std::string::npos);
    CHECK(html.find("0.00B parameters") == std::string::npos);
    CHECK(html.find(">0.00<") == std::string::npos);
    CHECK(html.find("0.00 GiB") == std::string::npos);
    // Every peak of the front, measured and estimated, in the unit its size reaches, and sorted by its bytes.
    const std::string front = table_html(html, "s0-front-table");
    REQUIRE(!front.empty());
    for (const char* title : {"peak", "est. peak"}) {
        const std::size_t col = column_of(front, title);
        for (const auto& row : body_rows(front)) {
            CHECK_THAT(cell_text(row[col]), Catch::EndsWith(" MiB") || Catch::EndsWith(" KiB"));
            CHECK(row[col].find("data-sort=\"") != std::string::npos);
        }
    }
    // The charts draw memory in MiB, the memory limit too.
    const auto pareto = chart(html, "s0-pareto-chart");
    CHECK(pareto["x_unit"] == "MiB");
    CHECK(pareto["limits"][0]["x"].get<double>() == Approx(64.0));
    CHECK(chart(html, "s0-predicted-chart")["x_unit"] == "MiB");
    CHECK(chart(html, "s0-breakdown-chart")["unit"] != "GiB");
    CHECK_THAT(chart(html, "s0-accuracy-memory")["x_label"].get<std::string>(), Catch::Contains("MiB"));

    const std::string text = render_text_report(std::vector<SweepData>{sweep});
    INFO(text);
    CHECK(text.find("model tiny (" + count_text(static_cast<double>(m.param_count())) + " parameters") !=
          std::string::npos);
    CHECK(text.find(" MiB") != std::string::npos);
    CHECK(text.find("0.00 GiB") == std::string::npos);
}

TEST_CASE("the report opens with what to run: per budget and context, the fastest that fits", "[report][what-to-run]") {
    const auto dir = test::report_scratch_dir("polish-what");
    const Store db(test::report_fixture_db(dir), Store::Mode::read_only);

    SECTION("budgets are the sweep's limit and the common sizes below it") {
        CHECK(what_to_run_budgets(load_sweep_data(db, "h100-demo")) ==
              std::vector<std::uint64_t>{24 * GiB, 40 * GiB, 80 * GiB});
        CHECK(what_to_run_budgets(load_sweep_data(db, "a100-demo")) == std::vector<std::uint64_t>{24 * GiB, 40 * GiB});
    }
    SECTION("each answer is the fastest measured trial that fits at that context") {
        const SweepData sweep = load_sweep_data(db, "h100-demo");
        const auto rows = what_to_run(sweep);
        CHECK(rows.size() == 3 * 3);  // budgets x contexts 1024, 2048, 4096
        for (const auto& row : rows) {
            double fastest = 0;
            for (const auto& t : sweep.trials)
                if (t.result.status == TrialStatus::ok && t.result.config.context == row.context &&
                    t.result.memory.peak <= row.budget)
                    fastest = std::max(fastest, t.result.tokens_per_s);
            INFO(budget_text(row) << " context " << row.context);
            REQUIRE(row.trial);
            CHECK(row.basis == Basis::measured);
            CHECK(answer_tokens_per_s(sweep, row) == fastest);
            CHECK(answer_peak(sweep, row) <= row.budget);
        }
    }
    SECTION("under a sweep's [framework] the budget holds that stack's predicted device memory, shown as the peak") {
        SweepData sweep = load_sweep_data(db, "h100-demo");
        sweep.summary.record.framework = "hf-trainer";
        for (TrialRecord& t : sweep.trials) {
            t.sweep_framework = "hf-trainer";
            const std::uint64_t peak = t.measured ? t.result.memory.peak : t.result.estimate->memory.peak;
            t.frameworks["hf-trainer"] = {peak, peak, peak * 3 / 2, 0, 1.0, t.result.tokens_per_s, true, ""};
        }
        const auto engine = what_to_run(load_sweep_data(db, "h100-demo"));
        const auto rows = what_to_run(sweep);
        REQUIRE(rows.size() == engine.size());
        std::size_t differs = 0;
        for (std::size_t i = 0; i < rows.size(); ++i) {
            if (!rows[i].trial) continue;
            INFO(budget_text(rows[i]) << " context " << rows[i].context);
            REQUIRE(rows[i].framework);
            CHECK(answer_peak(sweep, rows[i]) == rows[i].framework->device);
            if (!rows[i].budget_is_limit) CHECK(answer_peak(sweep, rows[i]) <= rows[i].budget);
            if (engine[i].trial != rows[i].trial) ++differs;
        }
        CHECK(differs > 0);  // 1.5x the peak moves some answers to smaller configurations
        CHECK_THAT(render_text_report(std::vector<SweepData>{sweep}), Catch::Contains("hf-trainer peak (pred.)"));
        // The page's measured front carries the stack's predicted device memory beside each trial.
        const std::string html = render_html_report(std::vector<SweepData>{sweep});
        const auto front = body_rows(table_html(html, "s0-front-table"));
        REQUIRE(!front.empty());
        CHECK(html.find("hf-trainer peak (pred.)") != std::string::npos);
        const TrialRecord& first = sweep.trials[sweep.front.front()];
        CHECK(html.find(bytes_text(first.frameworks.at("hf-trainer").device)) != std::string::npos);
    }
    SECTION("it is the first section of the page, one table per sweep") {
        const std::string html = html_report(db, std::vector<std::string>{"h100-demo", "a100-demo"});
        const std::size_t panel = html.find("<section id=\"what-to-run\">");
        REQUIRE(panel != std::string::npos);
        CHECK(panel < html.find("<section id=\"overview\">"));
        CHECK(html.find("<section id=") == panel);
        CHECK(body_rows(table_html(html, "s0-what-to-run-table")).size() == 9);
        CHECK(body_rows(table_html(html, "s1-what-to-run-table")).size() == 6);
        CHECK(html.find("80.00 GiB (the sweep&#39;s memory limit)") != std::string::npos);
    }
    SECTION("where nothing was measured the answer is predicted, and labelled so") {
        const auto tiny_dir = test::report_scratch_dir("polish-what-tiny");
        const Store tiny(test::tiny_fixture_db(tiny_dir), Store::Mode::read_only);
        const SweepData sweep = load_sweep_data(tiny, "tiny-demo");
        for (const auto& row : what_to_run(sweep)) {
            REQUIRE(row.trial);
            CHECK(row.basis == (row.context == test::kTinyPredictedContext ? Basis::predicted : Basis::measured));
        }
        const std::string html = html_report(tiny, std::vector<std::string>{"tiny-demo"});
        const auto rows = body_rows(table_html(html, "s0-what-to-run-table"));
        REQUIRE(rows.size() == 3);
        CHECK(cell_text(rows[2][2]) == "predicted (not measured)");
        // The CPU demo's limit (2.5 MiB) excludes the process's baseline that its peaks include: at the
        // sweep's own limit, whatever ran ok qualifies.
        SweepData low = sweep;
        low.memory_limit = 1 * MiB;
        for (const auto& row : what_to_run(low)) {
            CHECK(row.budget_is_limit);
            CHECK(row.trial);
        }
        const std::string text = render_text_report(std::vector<SweepData>{sweep});
        CHECK(text.find("what to run") < text.find("funnel"));
        CHECK(text.find("predicted") != std::string::npos);
    }
}

TEST_CASE("the all-trials table keeps the reason beside the status, shortened, whole on hover", "[report][trials]") {
    const auto dir = test::report_scratch_dir("polish-trials");
    const Store db(test::tiny_fixture_db(dir), Store::Mode::read_only);
    const std::string html = html_report(db, std::vector<std::string>{"tiny-demo"});
    const std::string table = table_html(html, "s0-trials-table");
    REQUIRE(!table.empty());
    CHECK(column_of(table, "reason") == 2);
    bool found = false;
    for (const auto& row : body_rows(table)) {
        if (row[2].find("class=\"reason\"") == std::string::npos || cell_text(row[2]).empty()) continue;
        found = true;
        const std::string text = cell_text(row[2]);
        CHECK(text.size() <= 170);                                                 // shortened in the cell
        CHECK(row[2].find("the end of a very long reason") != std::string::npos);  // whole in the title
    }
    CHECK(found);
    // The style sheet cuts it to one line.
    CHECK(html.find("table.data td.reason { max-width: 24em; overflow: hidden; text-overflow: ellipsis;") !=
          std::string::npos);
}

TEST_CASE("worst estimates lists no exact rows", "[report][accuracy]") {
    const auto dir = test::report_scratch_dir("polish-worst");
    const Store db(test::tiny_fixture_db(dir), Store::Mode::read_only);
    const std::string html = html_report(db, std::vector<std::string>{"tiny-demo"});
    const std::string worst = table_html(html, "s0-worst-table");
    REQUIRE(!worst.empty());
    const std::size_t error = column_of(worst, "error");
    const auto rows = body_rows(worst);
    CHECK(!rows.empty());
    for (const auto& row : rows) {
        CHECK(cell_text(row[error]) != "+0.0%");
        CHECK(cell_text(row[error]) != "-0.0%");
    }
    // Half of the tiny trials were exact: they are missing, the misses (measured 4% above) are listed.
    CHECK(html.find(">-3.8%<") != std::string::npos);
    CHECK(shown_as_zero(0.0));
    CHECK(shown_as_zero(-0.04));
    CHECK(!shown_as_zero(0.05));
}

TEST_CASE("pure bf16 is flagged as a convergence risk wherever it is recommended", "[report][risk]") {
    TrialConfig pure;
    pure.precision = Precision::bf16;
    TrialConfig mixed;
    mixed.precision = Precision::bf16_mixed;
    REQUIRE(convergence_risk(pure));
    CHECK(!convergence_risk(mixed));

    const auto dir = test::report_scratch_dir("polish-risk");
    const std::string path = test::tiny_fixture_db(dir);
    const Store db(path, Store::Mode::read_only);
    const std::string html = html_report(db, std::vector<std::string>{"tiny-demo"});
    // In the front, the predicted front and the panel ranking them with the rest: exactly the pure bf16 rows
    // carry the note.
    for (const char* id : {"s0-front-table", "s0-predicted-table", "s0-what-to-run-risk-any"}) {
        INFO(id);
        const std::string table = table_html(html, id);
        const auto rows = body_rows(table);
        REQUIRE(!rows.empty());
        const std::size_t note = column_of(table, "note");
        std::size_t flagged = 0;
        for (const auto& row : rows) {
            std::string all;
            for (const auto& c : row) all += cell_text(c) + " ";
            const bool pure_bf16 = all.find(" bf16 ") != std::string::npos;
            CHECK((cell_text(row[note]) == "convergence risk") == pure_bf16);
            flagged += pure_bf16;
        }
        CHECK(flagged > 0);
    }
    CHECK(html.find("title=\"pure bf16 keeps no fp32 master weights") != std::string::npos);
    // By default the panel answers with configurations without the risk, and offers the faster pure bf16 one
    // beside each answer with what it gains.
    {
        const std::string table = table_html(html, "s0-what-to-run-table");
        const std::size_t note = column_of(table, "note");
        const std::size_t alternative = column_of(table, "alternative with convergence risk");
        std::size_t offered = 0;
        for (const auto& row : body_rows(table)) {
            CHECK(cell_text(row[note]).empty());
            if (cell_text(row[alternative]).empty()) continue;
            CHECK_THAT(cell_text(row[alternative]), Catch::Contains(" bf16 ") && Catch::Contains("% tokens/s"));
            ++offered;
        }
        CHECK(offered > 0);
    }

    const std::string text = render_text_report(std::vector<SweepData>{load_sweep_data(db, "tiny-demo")});
    CHECK(text.find("convergence risk: pure bf16 keeps no fp32 master weights") != std::string::npos);

    // tune best: the answer without the risk, the faster risky one as the alternative; --allow-risk ranks
    // them together: the note column, its footnote, the JSON field, and the export.
    const auto best = test::run_tune("best --db " + path);
    INFO(best.output);
    CHECK_THAT(best.output, Catch::Contains("Alternative with a convergence risk: trial") &&
                                Catch::Contains("% tokens/s over the best; pure bf16"));
    const auto safe = nlohmann::json::parse(test::run_tune("best --json --db " + path).output);
    CHECK(safe["best"]["config"]["precision"] != "bf16");
    CHECK(safe["risky_alternative"]["config"]["precision"] == "bf16");
    CHECK_THAT(safe["risky_alternative"]["gain"].get<std::string>(), Catch::StartsWith("+"));
    CHECK(test::run_tune("best --emit deepspeed --db " + path).output.find("convergence risk") == std::string::npos);
    const auto together = test::run_tune("best --allow-risk --db " + path);
    CHECK(together.output.find("note") != std::string::npos);
    CHECK(together.output.find("convergence risk: pure bf16") != std::string::npos);
    const auto json = nlohmann::json::parse(test::run_tune("best --allow-risk --json --db " + path).output);
    CHECK(json["best"]["config"]["precision"] == "bf16");
    CHECK(json["risky_alternative"].is_null());
    CHECK_THAT(json["best"]["convergence_risk"].get<std::string>(), Catch::StartsWith("pure bf16"));
    const auto emitted = test::run_tune("best --allow-risk --emit deepspeed --db " + path);
    CHECK(emitted.output.find("# convergence risk: pure bf16") != std::string::npos);
    for (Framework f : {Framework::deepspeed, Framework::accelerate_fsdp, Framework::torchrun, Framework::hf_trainer}) {
        const RenderedExport r = render(export_config(f, pure), f);
        CHECK((r.out + r.notes).find("# convergence risk: pure bf16") != std::string::npos);
        const RenderedExport m = render(export_config(f, mixed), f);
        CHECK((m.out + m.notes).find("convergence risk") == std::string::npos);
    }
}

TEST_CASE("tune best and tune list scale their units for a tiny model", "[report][units][cli]") {
    const auto dir = test::report_scratch_dir("polish-best");
    const std::string path = test::tiny_fixture_db(dir);
    const auto best = test::run_tune("best --db " + path);
    INFO(best.output);
    REQUIRE(best.exit_code == 0);
    CHECK(best.output.find(" MiB") != std::string::npos);
    CHECK(best.output.find("0.00 GiB") == std::string::npos);
    const auto list = test::run_tune("list --db " + path);
    INFO(list.output);
    CHECK(std::regex_search(list.output, std::regex(R"([0-9.]+[KM]? tok/s at [0-9.]+ MiB \(measured\))")));
}

TEST_CASE("docs/commands.md defines every precision name the sweep files accept, and the README links it", "[docs]") {
    const std::filesystem::path source = TUNE_SOURCE_DIR;
    const std::string commands = read_file(source / "docs" / "commands.md");
    for (std::string_view name : kPrecisionNames) {
        INFO(name);
        CHECK(commands.find("| `" + std::string(name) + "` |") != std::string::npos);
    }
    CHECK(commands.find("convergence risk") != std::string::npos);
    CHECK(read_file(source / "README.md").find("(docs/commands.md)") != std::string::npos);
}
