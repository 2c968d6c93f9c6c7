// `tune report`: the HTML report (default) or terminal tables of one or more
// sweeps from the results database. Several sweeps, or `--compare A B`, give a
// comparison of each against the first.
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "cli/commands.h"
#include "cli/database_path.h"
#include "core/config_error.h"
#include "core/units.h"
#include "reports/html_report.h"
#include "reports/report_error.h"
#include "reports/sweep_data.h"
#include "reports/text_report.h"
#include "store/store.h"

namespace tune::cli {
namespace {

struct ReportOptions {
    DatabaseFlags db;
    std::vector<std::string> sweeps;
    std::vector<std::string> compare;
    std::string output = "report.html";
    std::string format = "html";
};

Store open_database(const std::string& path) {
    if (!std::filesystem::exists(path))
        throw ConfigError(fmt::format("no results database at {} (run a sweep first, or pass --db FILE)", path));
    return Store(path, Store::Mode::read_only);
}

// A reported sweep whose stored plan is damaged loses only its predicted makespan: said on stderr,
// and the rest reported.
void warn_damaged_plans(const Store& store, const std::vector<std::string>& names) {
    for (const std::string& name : resolve_sweep_names(store, names))
        if (const auto sweep = store.find_sweep(name); sweep && !sweep->record.plan_damage.empty())
            fmt::print(stderr, "warning: {}\n", sweep->record.plan_damage);
}

int run_report(const ReportOptions& o) {
    const Store store = open_database(reader_database(o.db));
    const std::vector<std::string>& names = o.compare.empty() ? o.sweeps : o.compare;
    warn_damaged_plans(store, names);
    if (o.format == "text") {
        fmt::print("{}", text_report(store, names));
        return kExitOk;
    }
    try {
        write_html_report(store, names, o.output);
    } catch (const ReportError& e) {
        fmt::print(stderr, "error: {}\n", e.what());
        return kExitBadInput;
    }
    fmt::print("wrote {} ({})\n", o.output, format_bytes(std::filesystem::file_size(o.output)));
    return kExitOk;
}

}  // namespace

void add_report_command(CLI::App& app, int& exit_code) {
    auto opts = std::make_shared<ReportOptions>();
    auto* cmd = app.add_subcommand("report",
                                   "Write a self-contained HTML report (or print text tables) of one or more sweeps.\n"
                                   "With several sweeps, each is compared against the first.");
    add_database_flags(cmd, opts->db);
    // An empty list shows no default ("[]" would read as a value).
    auto* sweep = without_default(
        cmd->add_option("--sweep", opts->sweeps, "Sweep to report; repeat for a comparison (default: the latest)"));
    auto* compare =
        without_default(cmd->add_option("--compare", opts->compare, "Compare two sweeps: --compare A B")->expected(2));
    compare->excludes(sweep);
    cmd->add_option("-o,--output", opts->output, "HTML file to write");
    cmd->add_option("--format", opts->format,
                    "html or text (text prints the funnel, the front and the estimator's error)")
        ->check(CLI::IsMember({"html", "text"}));
    cmd->callback([opts, &exit_code] { exit_code = run_report(*opts); });
}

}  // namespace tune::cli
