// `tune list`: the sweeps in a results database with their trial counts per
// status and each one's best throughput, measured or else predicted.
#include <memory>
#include <optional>
#include <string>

#include <fmt/format.h>

#include "cli/commands.h"
#include "cli/database_path.h"
#include "reports/report_format.h"
#include "reports/text_table.h"
#include "store/best.h"
#include "store/record_json.h"
#include "store/store.h"

namespace tune::cli {
namespace {

struct ListOptions {
    DatabaseFlags db;
    bool json = false;
};

std::string device_text(const DeviceInfo& d) {
    if (d.name.empty()) return "-";
    return fmt::format("{} x{} ({})", d.name, d.count, bytes_text(d.memory_bytes));
}

// A sweep's best throughput: measured when a trial finished ok, else the best predicted
// (estimates only) of what was not measured; nullopt when neither exists.
struct SweepBest {
    Basis basis = Basis::measured;
    double tokens_per_s = 0;
    std::uint64_t peak = 0;
};

// The numbers `tune best` ranks by: under the sweep's [framework], its predicted device peak.
std::optional<SweepBest> best_of(const Store& store, const std::string& sweep) {
    BestQuery q;
    q.sweep = sweep;
    q.top = 1;
    const BestAnswer measured = find_best(store, q);
    if (!measured.ranked.empty())
        return SweepBest{Basis::measured, answer_tokens_per_s(measured.ranked[0], Basis::measured),
                         answer_peak(measured.ranked[0], Basis::measured)};
    const BestAnswer predicted = find_best_predicted(store, q);
    if (predicted.ranked.empty()) return std::nullopt;
    return SweepBest{Basis::predicted, answer_tokens_per_s(predicted.ranked[0], Basis::predicted),
                     answer_peak(predicted.ranked[0], Basis::predicted)};
}

std::string best_text(const std::optional<SweepBest>& b) {
    if (!b) return "-";
    return fmt::format("{} tok/s at {} ({})", throughput_text(b->tokens_per_s), bytes_text(b->peak),
                       to_string(b->basis));
}

void print_sweeps(const Store& store, const std::vector<SweepSummary>& sweeps) {
    std::vector<std::string> header{"sweep", "created", "host", "devices", "backend", "trials"};
    for (TrialStatus s : kStatuses) header.emplace_back(to_string(s));
    header.emplace_back("best (measured, else predicted)");
    TextTable table(header);
    for (const auto& s : sweeps) {
        const SweepRecord& r = s.record;
        std::vector<std::string> row{r.name,    format_timestamp(r.created_at).substr(0, 16),
                                     r.host,    device_text(r.device),
                                     r.backend, std::to_string(s.total())};
        for (TrialStatus st : kStatuses) row.push_back(std::to_string(s.count(st)));
        row.push_back(best_text(best_of(store, r.name)));
        table.add_row(std::move(row));
    }
    fmt::print("{}", table.render());
}

int run_list(const ListOptions& o) {
    const std::string db = reader_database(o.db);
    const Store store = Store::open_reader(db);
    const auto sweeps = store.sweeps();
    if (o.json) {
        nlohmann::json out = nlohmann::json::array();
        for (const auto& s : sweeps) {
            nlohmann::json j = sweep_json(s);
            const auto best = best_of(store, s.record.name);
            j["best"] = best ? nlohmann::json{{"basis", to_string(best->basis)},
                                              {"tokens_per_s", best->tokens_per_s},
                                              {"peak_bytes", best->peak}}
                             : nlohmann::json(nullptr);
            out.push_back(std::move(j));
        }
        fmt::print("{}\n", dump_json(out));
        return kExitOk;
    }
    if (sweeps.empty()) {
        fmt::print("{} holds no sweeps yet.\n", db);
        return kExitOk;
    }
    print_sweeps(store, sweeps);
    return kExitOk;
}

}  // namespace

void add_list_command(CLI::App& app, int& exit_code) {
    auto* cmd = app.add_subcommand("list", "List the sweeps in a results database with trial counts per status.");
    auto o = std::make_shared<ListOptions>();
    add_database_flags(cmd, o->db);
    cmd->add_flag("--json", o->json, "Print a JSON array of sweeps");
    cmd->callback([&exit_code, o] { exit_code = run_list(*o); });
}

}  // namespace tune::cli
