// `tune best`: the best measured configuration that meets the constraints, the
// runners-up, and the `tune trial` command that reproduces it; exit 1 and the
// reasons when nothing qualifies.
#include <memory>
#include <string>

#include <fmt/format.h>

#include "cli/commands.h"
#include "cli/dimension_flags.h"
#include "reports/text_table.h"
#include "core/units.h"
#include "store/best.h"
#include "store/record_json.h"
#include "store/store.h"
#include "cli/trial_command.h"

namespace tune::cli {
namespace {

struct BestOptions {
    std::string db = "tune.db";
    std::string sweep;
    std::string max_memory;
    std::uint32_t min_context = 0;
    std::uint32_t gpus = 0;
    DimensionFlags dims;
    std::string by = "tokens_per_s";
    std::size_t top = 5;
    bool json = false;
};

BestQuery to_query(const BestOptions& o) {
    BestQuery q;
    if (!o.sweep.empty()) q.sweep = o.sweep;
    if (!o.max_memory.empty()) {
        q.max_memory = parse_bytes(o.max_memory);
        if (!q.max_memory) throw ConfigError(fmt::format("--max-memory: '{}' is not a size (e.g. 40GiB)", o.max_memory));
    }
    if (o.min_context) q.min_context = o.min_context;
    if (o.gpus) q.gpus = o.gpus;
    q.equal = o.dims.given();
    q.by = o.by == "peak_memory" ? BestBy::peak_memory : BestBy::tokens_per_s;
    q.top = std::max<std::size_t>(o.top, 1);
    return q;
}

// The answer's own columns first, then the configuration, then its GPU count.
std::vector<std::string> row_of(std::size_t rank, const TrialRecord& t, bool on_front) {
    std::vector<std::string> row{std::to_string(rank),
                                 on_front ? "yes" : "",
                                 t.sweep_name,
                                 std::to_string(t.id),
                                 fmt::format("{:.0f}", t.result.tokens_per_s),
                                 format_bytes(t.result.memory.peak),
                                 t.median_step_s ? fmt::format("{:.3f}", *t.median_step_s) : "-",
                                 fmt::format("{:.1f}%", t.result.mfu * 100)};
    for (auto& cell : config_row(t.result.config, {std::to_string(t.result.config.world_size)}))
        row.push_back(std::move(cell));
    return row;
}

void print_answer(const BestAnswer& a) {
    std::vector<std::string> header{"#", "front", "sweep", "trial", "tokens/s", "peak", "step s", "MFU"};
    for (auto& h : config_header({"gpus"})) header.push_back(std::move(h));
    TextTable table(header);
    for (std::size_t i = 0; i < a.ranked.size(); ++i) table.add_row(row_of(i + 1, a.ranked[i], a.on_front[i]));
    fmt::print("Best of {} qualifying configurations ({} measured ok; front: on the Pareto front of peak memory\n"
               "against tokens/s among those that qualify):\n{}\nReproduce the best:\n  {}\n", a.qualifying,
               a.measured_ok, table.render("  "), trial_command(a.ranked.front().result.config));
}

void print_none(const BestAnswer& a, bool json) {
    if (json) {
        fmt::print("{}\n", dump_json({{"best", nullptr}, {"measured_ok", a.measured_ok}, {"why", a.why_none}}));
        return;
    }
    fmt::print("Nothing qualifies:\n");
    for (const auto& why : a.why_none) fmt::print("  - {}\n", why);
}

int run_best(const BestOptions& o) {
    const BestQuery query = to_query(o);
    const Store store = Store::open_reader(o.db);
    const BestAnswer answer = find_best(store, query);
    if (answer.ranked.empty()) {
        print_none(answer, o.json);
        return kExitNo;
    }
    if (!o.json) {
        print_answer(answer);
        return kExitOk;
    }
    nlohmann::json runners = nlohmann::json::array();
    auto ranked_json = [&](std::size_t i) {
        nlohmann::json j = record_json(answer.ranked[i]);
        j["on_front"] = static_cast<bool>(answer.on_front[i]);
        return j;
    };
    for (std::size_t i = 1; i < answer.ranked.size(); ++i) runners.push_back(ranked_json(i));
    fmt::print("{}\n", dump_json({{"best", ranked_json(0)},
                                  {"command", trial_command(answer.ranked.front().result.config)},
                                  {"runners_up", runners},
                                  {"qualifying", answer.qualifying},
                                  {"measured_ok", answer.measured_ok}}));
    return kExitOk;
}

}  // namespace

void add_best_command(CLI::App& app, int& exit_code) {
    auto* cmd = app.add_subcommand("best", "The best measured configuration that meets the constraints.");
    auto o = std::make_shared<BestOptions>();
    cmd->add_option("--db", o->db, "Results database (default: tune.db)");
    cmd->add_option("--sweep", o->sweep, "Only this sweep (default: every sweep)");
    cmd->add_option("--max-memory", o->max_memory, "Measured peak per GPU at most this, e.g. 40GiB");
    cmd->add_option("--min-context", o->min_context, "Context length at least this");
    cmd->add_option("--gpus", o->gpus, "Exactly this many GPUs (ranks)");
    add_dimension_flags(cmd, o->dims, nullptr, "Only this value: ");
    cmd->add_option("--by", o->by, "Rank by tokens_per_s (default) or peak_memory")
        ->check(CLI::IsMember({"tokens_per_s", "peak_memory"}));
    cmd->add_option("--top", o->top, "How many to show, the best included (default 5)")->check(CLI::PositiveNumber);
    cmd->add_flag("--json", o->json, "Print JSON");
    cmd->callback([&exit_code, o] { exit_code = run_best(*o); });
}

}  // namespace tune::cli
