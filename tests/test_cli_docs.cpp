// docs/commands.md's "## Every flag" section is generated here from CLI11's own
// list of each command's options, so a flag cannot be added, renamed or given a
// new default without the page following; on a difference the test prints the
// section to paste. The defaults are those `tune COMMAND --help` shows.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>

#include <CLI/CLI.hpp>

#include "cli/commands.h"

namespace {

constexpr const char* kHeading = "## Every flag\n";

// One table cell: one line, and a '|' that does not end the cell.
std::string cell(const std::string& text) {
    std::string out;
    for (const char c : text) {
        if (c == '\n')
            out += ' ';
        else if (c == '|')
            out += "\\|";
        else
            out += c;
    }
    return out;
}

// A positional argument by its name; an option by every name it answers to.
std::string names(const CLI::Option& option) {
    if (option.get_positional()) return "`" + option.get_name(true) + "`";
    std::string out;
    for (const std::string& s : option.get_snames()) out += (out.empty() ? "`-" : ", `-") + s + "`";
    for (const std::string& l : option.get_lnames()) out += (out.empty() ? "`--" : ", `--") + l + "`";
    return out;
}

// A command's table, one row per option in --help's order, --help itself left out.
std::string command_table(const std::string& heading, const CLI::App& command) {
    std::string out = "### " + heading + "\n\n| flag | default | what it does |\n| --- | --- | --- |\n";
    for (const CLI::Option* option : command.get_options()) {
        if (option == command.get_help_ptr()) continue;
        out += "| " + names(*option) + " | " + cell(option->get_default_str()) + " | " +
               cell(option->get_description()) + " |\n";
    }
    return out;
}

// The section as the app holds it: tune's own options, then every command users start (hidden
// ones have no group), in the order run_cli adds them.
std::string every_flag_section(CLI::App& app) {
    std::string out = std::string(kHeading) +
                      "\nGenerated from the app's own option list (tests/test_cli_docs.cpp, which prints this section "
                      "when the page differs). A default is what `--help` shows; it is empty where the option is "
                      "off unless given, or where its description says what happens without it. `tune "
                      "probe-collectives`, the probe ranks that `tune probe` and `tune sweep` start, is left out.\n";
    out += "\n" + command_table("tune", app);
    for (const CLI::App* command : app.get_subcommands([](const CLI::App* c) { return !c->get_group().empty(); }))
        out += "\n" + command_table("tune " + command->get_name(), *command);
    return out;
}

// The page's section from its heading up to the next "## " heading ("" when absent).
std::string documented_section() {
    std::ifstream in(std::filesystem::path(TUNE_SOURCE_DIR) / "docs" / "commands.md", std::ios::binary);
    std::ostringstream doc;
    doc << in.rdbuf();
    const std::string text = doc.str();
    const std::size_t start = text.find(kHeading);
    if (start == std::string::npos) return "";
    const std::size_t end = text.find("\n## ", start + 1);
    return text.substr(start, end == std::string::npos ? std::string::npos : end - start);
}

}  // namespace

TEST_CASE("docs/commands.md's Every flag section is every command's options as CLI11 lists them", "[cli][docs]") {
    CLI::App app;
    int exit_code = 0;
    tune::cli::build_app(app, exit_code);
    const std::string expected = every_flag_section(app);
    // Flags the page once left out (issue 64), so the generator is known to reach them.
    for (const char* flag : {"`--steps`", "`--seed`", "`--lr`", "`--no-graphs`", "`--require-gpu`"})
        CHECK(expected.find(flag) != std::string::npos);
    if (documented_section() == expected) return;
    // Printed whole and unwrapped (Catch wraps its messages at 80 columns), ready to paste.
    std::cout << "---- docs/commands.md's section as the app holds it ----\n" << expected << "---- end ----\n";
    FAIL("docs/commands.md's \"## Every flag\" section is not the app's: put the section printed above in its place");
}

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
