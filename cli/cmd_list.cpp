// `tune list`: the sweeps in a results database with their trial counts per status.
#include <memory>
#include <string>

#include <fmt/format.h>

#include "cli/commands.h"
#include "reports/text_table.h"
#include "core/units.h"
#include "store/record_json.h"
#include "store/store.h"

namespace tune::cli {
namespace {

struct ListOptions {
    std::string db = "tune.db";
    bool json = false;
};

std::string device_text(const DeviceInfo& d) {
    if (d.name.empty()) return "-";
    return fmt::format("{} x{} ({})", d.name, d.count, format_bytes(d.memory_bytes));
}

void print_sweeps(const std::vector<SweepSummary>& sweeps) {
    std::vector<std::string> header{"sweep", "created", "host", "devices", "backend", "trials"};
    for (TrialStatus s : kStatuses) header.emplace_back(to_string(s));
    TextTable table(header);
    for (const auto& s : sweeps) {
        const SweepRecord& r = s.record;
        std::vector<std::string> row{r.name, format_timestamp(r.created_at).substr(0, 16), r.host,
                                     device_text(r.device), r.backend, std::to_string(s.total())};
        for (TrialStatus st : kStatuses) row.push_back(std::to_string(s.count(st)));
        table.add_row(std::move(row));
    }
    fmt::print("{}", table.render());
}

int run_list(const ListOptions& o) {
    const Store store = Store::open_reader(o.db);
    const auto sweeps = store.sweeps();
    if (o.json) {
        nlohmann::json out = nlohmann::json::array();
        for (const auto& s : sweeps) out.push_back(sweep_json(s));
        fmt::print("{}\n", dump_json(out));
        return kExitOk;
    }
    if (sweeps.empty()) {
        fmt::print("{} holds no sweeps yet.\n", o.db);
        return kExitOk;
    }
    print_sweeps(sweeps);
    return kExitOk;
}

}  // namespace

void add_list_command(CLI::App& app, int& exit_code) {
    auto* cmd = app.add_subcommand("list", "List the sweeps in a results database with trial counts per status.");
    auto o = std::make_shared<ListOptions>();
    cmd->add_option("--db", o->db, "Results database (default: tune.db)");
    cmd->add_flag("--json", o->json, "Print a JSON array of sweeps");
    cmd->callback([&exit_code, o] { exit_code = run_list(*o); });
}

}  // namespace tune::cli
