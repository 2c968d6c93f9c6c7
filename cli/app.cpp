#include <cstring>
#include <exception>
#include <filesystem>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "build_info.h"
#include "cli/commands.h"
#include "core/config_error.h"
#include "core/output_file.h"
#include "reports/report_error.h"
#include "reports/text_table.h"
#include "store/store_error.h"

namespace tune::cli {
namespace {

std::string version_text() {
    return fmt::format("tune {} (commit {}, {} build, {})", TUNE_VERSION, TUNE_GIT_COMMIT, TUNE_BUILD_TYPE,
                       TUNE_COMPILER);
}

// `tune sweeps/x.toml` means `tune sweep sweeps/x.toml`.
std::vector<std::string> with_default_command(int argc, const char* const* argv) {
    std::vector<std::string> args(argv, argv + argc);
    if (args.size() >= 2 && args[1].size() > 5 && args[1].ends_with(".toml")) args.insert(args.begin() + 1, "sweep");
    return args;
}

}  // namespace

void build_app(CLI::App& app, int& exit_code) {
    app.name("tune");
    app.description(
        "tune: find the LLM training configuration that fits your GPUs and runs fastest there.\n\n"
        "  tune sweeps/demo.toml                run a sweep (= tune sweep FILE): estimate, prune, run, record\n"
        "  tune validate sweeps/llama7b.toml    check a sweep file and count its configurations\n"
        "  tune estimate sweeps/llama7b.toml    the estimator over a whole sweep (or one config by flags)\n"
        "  tune best --max-memory 40GiB         the fastest measured configuration that fits\n"
        "  tune report -o report.html           a self-contained HTML report (or --format text)\n"
        "  tune trial --model tiny ...          one configuration for real\n"
        "  tune list | export | presets | devices | selftest\n\n"
        "Run `tune COMMAND --help` for each command's options.");
    app.set_version_flag("--version", version_text());
    app.require_subcommand(1);
    app.fallthrough(false);
    // Every option --help lists shows its default; each subcommand copies these settings when added.
    app.option_defaults()->always_capture_default();
    // A flag given wrong reads as every other bad input does (exit 2, "error: ..."), whichever check caught it.
    app.failure_message(
        [](const CLI::App* a, const CLI::Error& e) { return "error: " + CLI::FailureMessage::simple(a, e); });

    add_sweep_command(app, exit_code);
    add_validate_command(app, exit_code);
    add_estimate_command(app, exit_code);
    add_presets_command(app, exit_code);
    add_devices_command(app, exit_code);
    add_selftest_command(app, exit_code);
    add_list_command(app, exit_code);
    add_best_command(app, exit_code);
    add_export_command(app, exit_code);
    add_trial_command(app, exit_code);
    add_report_command(app, exit_code);
    add_status_command(app, exit_code);
    add_submit_command(app, exit_code);
    add_probe_command(app, exit_code);
    add_probe_collectives_command(app, exit_code);
}

int run_cli(int argc, const char* const* argv) {
    CLI::App app;
    int exit_code = kExitOk;
    build_app(app, exit_code);

    if (argc <= 1) {
        fmt::print(stderr, "{}", app.help());
        return kExitBadInput;
    }
    std::vector<std::string> args = with_default_command(argc, argv);
    std::vector<const char*> pointers;
    for (const auto& a : args) pointers.push_back(a.c_str());
    try {
        app.parse(static_cast<int>(pointers.size()), pointers.data());
    } catch (const CLI::CallForHelp& e) {
        return app.exit(e);
    } catch (const CLI::CallForAllHelp& e) {
        return app.exit(e);
    } catch (const CLI::CallForVersion& e) {
        return app.exit(e);
    } catch (const CLI::ParseError& e) {
        app.exit(e);
        return kExitBadInput;
    } catch (const ConfigError& e) {
        fmt::print(stderr, "error: {}\n", printable(e.located(), "\n"));
        return kExitBadInput;
    } catch (const StoreError& e) {
        // A corrupt, foreign or newer database, an unwritable place, a full disk: the user's to fix.
        if (!e.about_the_file()) {
            fmt::print(stderr, "internal error: {}\n", e.what());
            return kExitInternal;
        }
        fmt::print(stderr, "error: results database: {}\n", printable(e.what(), "\n"));
        return kExitBadInput;
    } catch (const ReportError& e) {
        fmt::print(stderr, "error: {}\n", printable(e.what(), "\n"));
        return kExitBadInput;
    } catch (const OutputFileError& e) {
        fmt::print(stderr, "error: {}\n", printable(e.what(), "\n"));
        return kExitBadInput;
    } catch (const std::filesystem::filesystem_error& e) {
        // A path the user gave that cannot be used: missing directory, symlink loop, no permission.
        fmt::print(stderr, "error: {}\n", printable(e.what(), "\n"));
        return kExitBadInput;
    } catch (const std::exception& e) {
        fmt::print(stderr, "internal error: {}\n", printable(e.what(), "\n"));
        return kExitInternal;
    }
    return exit_code;
}

}  // namespace tune::cli
