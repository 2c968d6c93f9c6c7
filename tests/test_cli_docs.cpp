// What `tune COMMAND --help` shows of each option's default, read from the app
// run_cli parses.
#include <catch2/catch.hpp>

#include <string>

#include <CLI/CLI.hpp>

#include "cli/commands.h"

TEST_CASE("tune COMMAND --help shows each option's real default, and none where the value only means not given",
          "[cli]") {
    CLI::App app;
    int exit_code = 0;
    tune::cli::build_app(app, exit_code);
    const auto default_of = [&](const char* command, const char* option) {
        return app.get_subcommand(command)->get_option(option)->get_default_str();
    };
    // tune trial's numbers are TrialConfig's defaults, which apply when a flag is not given.
    CHECK(default_of("trial", "--lr") == "0.0001");
    CHECK(default_of("trial", "--clip") == "1");
    CHECK(default_of("trial", "--steps") == "6");
    CHECK(default_of("trial", "--beta1").empty());  // the optimizer's own
    CHECK(default_of("estimate", "--margin") == "0.05");
    CHECK(default_of("best", "--gpus").empty());  // 0 means any number of GPUs
    CHECK(default_of("report", "--sweep").empty());
}
