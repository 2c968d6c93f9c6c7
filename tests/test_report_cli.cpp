// `tune report` end to end: text tables, the HTML file, comparisons and the
// errors a user can make.
#include <catch2/catch.hpp>

#include "tests/support/report_files.h"
#include "tests/support/run_command.h"

using namespace tune;

TEST_CASE("tune report --format text prints the funnel, the front and the estimator's error", "[report][cli]") {
    const auto dir = test::report_scratch_dir("cli-text");
    const std::string db = test::report_fixture_db(dir);
    const auto r = test::run_tune("report --db " + db + " --sweep h100-demo --format text");
    INFO(r.output);
    REQUIRE(r.exit_code == 0);
    CHECK(r.output.find("sweep h100-demo: 8 x NVIDIA H100 80GB HBM3 on gpu-node-01") != std::string::npos);
    CHECK(r.output.find("  enumerated      384") != std::string::npos);
    CHECK(r.output.find("Pareto front (") != std::string::npos);
    CHECK(r.output.find("peak memory") != std::string::npos);
    CHECK(r.output.find("step time") != std::string::npos);
}

TEST_CASE("tune report writes the HTML file, --compare adds the comparison", "[report][cli]") {
    const auto dir = test::report_scratch_dir("cli-html");
    const std::string db = test::report_fixture_db(dir);
    const auto out = dir / "cmp.html";
    const auto r = test::run_tune("report --db " + db + " --compare h100-demo a100-demo -o " + out.string());
    INFO(r.output);
    REQUIRE(r.exit_code == 0);
    CHECK(r.output.find("wrote " + out.string()) != std::string::npos);
    const std::string html = test::read_text_file(out);
    CHECK(html.find("id=\"cmp1-comparison\"") != std::string::npos);
    CHECK(html.find("<title>tune report: h100-demo vs a100-demo</title>") != std::string::npos);
    const auto text = test::run_tune("report --db " + db + " --sweep h100-demo --sweep a100-demo --format text");
    CHECK(text.output.find("a100-demo against h100-demo: 384 configurations in both (0 by hash, 384 by dimensions)") !=
          std::string::npos);
}

TEST_CASE("tune report says what is wrong with its input", "[report][cli]") {
    const auto dir = test::report_scratch_dir("cli-errors");
    const std::string db = test::report_fixture_db(dir);
    auto r = test::run_tune("report --db " + db + " --sweep nope --format text");
    CHECK(r.exit_code == 2);
    CHECK(r.output.find("no sweep named \"nope\"") != std::string::npos);
    CHECK(r.output.find("h100-demo") != std::string::npos);  // it lists what there is
    r = test::run_tune("report --db " + (dir / "absent.db").string());
    CHECK(r.exit_code == 2);
    CHECK(r.output.find("no results database") != std::string::npos);
    r = test::run_tune("report --db " + db + " --format pdf");
    CHECK(r.exit_code == 2);
    r = test::run_tune("report --db " + db + " --sweep h100-demo -o " + (dir / "no" / "such" / "dir.html").string());
    CHECK(r.exit_code == 2);
    CHECK(r.output.find("cannot write the report") != std::string::npos);
}
