// The `tune` binary as users run it: exit codes, help, and the foundation commands.
#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>

#include "support/run_command.h"

using tune::test::run_tune;

TEST_CASE("tune validate accepts the shipped sweeps and reports their size", "[cli]") {
    auto r = run_tune(std::string("validate ") + TUNE_SOURCE_DIR + "/sweeps/llama7b.toml");
    CHECK(r.exit_code == 0);
    CHECK_THAT(r.output, Catch::Contains("= 12960 combinations"));
    CHECK_THAT(r.output, Catch::Contains("1728  lomo-accumulation"));
    // Selective checkpointing with flash attention is the same run as none: a sixth of the space, less
    // what is invalid anyway (lomo with accumulation), runs once.
    CHECK_THAT(r.output, Catch::Contains("collapsed 1872"));
    CHECK_THAT(r.output, Catch::Contains("runnable  9360"));

    auto j = run_tune(std::string("validate --json ") + TUNE_SOURCE_DIR + "/sweeps/demo.toml");
    REQUIRE(j.exit_code == 0);
    const auto parsed = nlohmann::json::parse(j.output);
    CHECK(parsed["name"] == "demo-cpu");
    CHECK(parsed["combinations"].get<int>() > parsed["runnable"].get<int>());
}

TEST_CASE("tune validate exits 2 with file:line:col on a bad file, 1 when nothing is runnable", "[cli]") {
    auto bad =
        run_tune(std::string("validate ") + TUNE_SOURCE_DIR + "/tests/sweeps_bad/04-zero-stage-out-of-range.toml");
    CHECK(bad.exit_code == 2);
    CHECK_THAT(bad.output,
               Catch::Contains("04-zero-stage-out-of-range.toml:6:18: [space] zero_stage: 5 is out of range"));

    auto missing = run_tune("validate /nonexistent.toml");
    CHECK(missing.exit_code == 2);
    CHECK_THAT(missing.output, Catch::Contains("cannot open"));

    const std::string path = std::string(TUNE_BUILD_DIR) + "/nothing-runnable.toml";
    tune::test::run_command(
        "printf '[model]\\npreset = \"tiny\"\\n[space]\\noptimizer = \"lomo\"\\ngrad_accum = 4\\n' > " + path);
    auto none = run_tune("validate " + path);
    CHECK(none.exit_code == 1);
    CHECK_THAT(none.output, Catch::Contains("nothing to run"));
}

TEST_CASE("every subcommand has --help, and usage errors exit 2", "[cli]") {
    auto top = run_tune("--help");
    CHECK(top.exit_code == 0);
    for (const char* cmd : {"validate", "presets", "devices"}) {
        INFO(cmd);
        CHECK_THAT(top.output, Catch::Contains(cmd));
        auto help = run_tune(std::string(cmd) + " --help");
        CHECK(help.exit_code == 0);
        CHECK_THAT(help.output, Catch::Contains("Usage"));
    }
    CHECK(run_tune("").exit_code == 2);
    CHECK(run_tune("no-such-command").exit_code == 2);
    CHECK(run_tune("validate").exit_code == 2);
    // Negative counts are refused, not wrapped into "everything" (issue 14, item 18).
    const auto negative_top = run_tune("best --top -1");
    CHECK(negative_top.exit_code == 2);
    CHECK_THAT(negative_top.output, Catch::Contains("--top"));
    const auto max_trials =
        run_tune(std::string("sweep ") + TUNE_SOURCE_DIR + "/sweeps/demo.toml --dry-run --max-trials -1");
    CHECK(max_trials.exit_code == 2);
    CHECK_THAT(max_trials.output, Catch::Contains("--max-trials"));
}

TEST_CASE("tune --version names the version and commit", "[cli]") {
    auto r = run_tune("--version");
    CHECK(r.exit_code == 0);
    CHECK_THAT(r.output, Catch::StartsWith("tune 0.1.0 (commit "));
}

TEST_CASE("tune presets lists models and devices with numbers", "[cli]") {
    auto r = run_tune("presets --json");
    REQUIRE(r.exit_code == 0);
    const auto j = nlohmann::json::parse(r.output);
    bool found = false;
    for (const auto& m : j["models"])
        if (m["name"] == "llama-70b") {
            CHECK(m["parameters"].get<std::uint64_t>() == 68'976'648'192ull);
            CHECK(m["kv_heads"] == 8);
            found = true;
        }
    CHECK(found);
    CHECK(j["devices"].size() == 8);
    auto text = run_tune("presets");
    CHECK_THAT(text.output, Catch::Contains("h100-80gb"));
    CHECK_THAT(text.output, Catch::Contains("989.0"));
}

TEST_CASE("tune devices answers with devices or says why there are none", "[cli]") {
    auto r = run_tune("devices --json");
    REQUIRE(r.exit_code == 0);
    const auto j = nlohmann::json::parse(r.output);
    if (j["devices"].empty()) CHECK_FALSE(j["why_none"].get<std::string>().empty());
    auto text = run_tune("devices");
    CHECK(text.exit_code == 0);
    CHECK_THAT(text.output, Catch::Contains("CUDA backend compiled"));
}
