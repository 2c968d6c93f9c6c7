// Each `tune` subcommand registers itself on the CLI11 app. A command writes
// its exit code into `exit_code`; errors it cannot handle are thrown as the
// typed exceptions that run_cli() turns into messages and exit codes.
//
// Exit codes: 0 success; 1 the command ran but the answer is "no" (a sweep
// with nothing runnable, no configuration qualifies, a failed self-test);
// 2 bad input (usage, sweep file, flags); 3 internal or backend error.
// `tune trial` maps trial statuses to its own codes (see cmd_trial.cpp).
#pragma once

#include <CLI/CLI.hpp>

namespace tune::cli {

inline constexpr int kExitOk = 0;
inline constexpr int kExitNo = 1;
inline constexpr int kExitBadInput = 2;
inline constexpr int kExitInternal = 3;

void add_validate_command(CLI::App& app, int& exit_code);
void add_estimate_command(CLI::App& app, int& exit_code);
void add_sweep_command(CLI::App& app, int& exit_code);
void add_presets_command(CLI::App& app, int& exit_code);
void add_devices_command(CLI::App& app, int& exit_code);
void add_selftest_command(CLI::App& app, int& exit_code);
void add_list_command(CLI::App& app, int& exit_code);
void add_best_command(CLI::App& app, int& exit_code);
void add_export_command(CLI::App& app, int& exit_code);
void add_trial_command(CLI::App& app, int& exit_code);
void add_report_command(CLI::App& app, int& exit_code);
void add_status_command(CLI::App& app, int& exit_code);
void add_submit_command(CLI::App& app, int& exit_code);
void add_probe_command(CLI::App& app, int& exit_code);
void add_probe_collectives_command(CLI::App& app, int& exit_code);

// For an option whose initial value only means "not given" (0 GPUs: any number), so
// that --help, which shows every other option's default, shows none for it.
inline CLI::Option* without_default(CLI::Option* option) { return option->default_str(""); }

// The whole `tune` app, every subcommand added, as run_cli() parses it; tests read its
// options from here (docs/commands.md's table of every flag is held to it).
void build_app(CLI::App& app, int& exit_code);

// Parses argv and runs the chosen command. Never calls exit().
int run_cli(int argc, const char* const* argv);

}  // namespace tune::cli
