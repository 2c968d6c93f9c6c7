// `tune best`: the best measured configuration that meets the constraints, the
// runners-up, and the `tune trial` command that reproduces it; then the best
// predicted among the configurations not measured (an estimate-only sweep has
// only these); exit 1 and the reasons when nothing qualifies. With --emit F, only
// what F expresses exactly qualifies (exports/expressible.h).
#include <algorithm>
#include <memory>
#include <optional>
#include <string>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "cli/commands.h"
#include "cli/database_path.h"
#include "cli/dimension_flags.h"
#include "cli/emit.h"
#include "cli/framework_flag.h"
#include "cli/trial_command.h"
#include "core/convergence_risk.h"
#include "core/noise_ties.h"
#include "core/parallel_plan.h"
#include "core/units.h"
#include "estimate/frameworks/framework_profile.h"
#include "exports/expressible.h"
#include "exports/framework.h"
#include "exports/yaml_text.h"
#include "reports/report_format.h"
#include "reports/risk_note.h"
#include "reports/text_table.h"
#include "store/best.h"
#include "store/record_json.h"
#include "store/store.h"

namespace tune::cli {
namespace {

struct BestOptions {
    DatabaseFlags db;
    std::string sweep;
    std::string max_memory;
    std::string max_host_memory;
    std::uint32_t min_context = 0;
    std::uint32_t gpus = 0;
    DimensionFlags dims;
    std::string by = "tokens_per_s";
    std::size_t top = 5;
    bool json = false;
    bool allow_risk = false;
    std::string emit;
    std::string framework;
};

BestQuery to_query(const BestOptions& o) {
    BestQuery q;
    if (!o.sweep.empty()) q.sweep = o.sweep;
    if (!o.max_memory.empty()) q.max_memory = require_bytes(o.max_memory, "--max-memory");
    if (!o.max_host_memory.empty()) q.max_host_memory = require_bytes(o.max_host_memory, "--max-host-memory");
    if (o.min_context) q.min_context = o.min_context;
    if (o.gpus) q.gpus = o.gpus;
    q.equal = o.dims.given();
    q.by = o.by == "peak_memory" ? BestBy::peak_memory : BestBy::tokens_per_s;
    q.top = std::max<std::size_t>(o.top, 1);
    q.allow_risk = o.allow_risk;
    // --emit F answers for F's stack unless --framework names another.
    if (!o.framework.empty())
        q.framework = std::string(to_string(framework_flag_profile(o.framework)));
    else if (!o.emit.empty())
        q.framework = std::string(to_string(profile_of(*parse_framework(o.emit))));
    // What --emit F prints must be what F expresses exactly: the rest is ranked out of the answer.
    if (!o.emit.empty()) {
        const Framework f = *parse_framework(o.emit);  // the flag accepts only the names
        q.emit = EmitTarget{o.emit, [f](const TrialConfig& c) { return inexpressible(f, c); }};
    }
    return q;
}

// On stderr, beside the notes: how many configurations --emit ranked out of an answer, and the best's reason.
void print_ranked_out(const BestAnswer& a, const std::string& target) {
    if (a.inexpressible == 0) return;
    fmt::print(stderr, "# left out of the {} answer: {} configurations {} cannot express exactly; the best: {}\n",
               to_string(a.basis), a.inexpressible, target, one_line(a.inexpressible_example));
}

// The answer's own columns first, then the configuration, then its GPU count.
// host: some ranked configuration offloads, so each row shows its host ledger per rank.
std::vector<std::string> row_of(std::size_t rank, const TrialRecord& t, bool on_front, Basis basis, bool notes,
                                bool host) {
    const bool measured = basis == Basis::measured;
    const Estimate* e = t.result.estimate ? &*t.result.estimate : nullptr;

    // A measured trial recorded without an estimate (`tune trial` records) reads only what it measured.
    const std::uint64_t peak = t.answered_for ? t.answered_for->device
                               : measured     ? t.result.memory.peak
                                              : e->memory.peak;
    const double predicted_rate = t.answered_for ? t.answered_for->tokens_per_s : e ? e->tokens_per_s : 0.0;
    const std::optional<double> step = measured ? t.median_step_s : std::optional<double>(e->step_s);
    std::vector<std::string> row{std::to_string(rank),
                                 on_front ? "yes" : "",
                                 t.sweep_name,
                                 std::to_string(t.id),
                                 throughput_text(measured ? t.result.tokens_per_s : predicted_rate),
                                 bytes_text(peak),
                                 step ? seconds_text(*step) : "-",
                                 fmt::format("{:.1f}%", (measured ? t.result.mfu : e->mfu) * 100)};
    for (auto& cell : config_row(t.result.config, {std::to_string(parallel_plan(t.result.config).world())}))
        row.push_back(std::move(cell));
    if (host) {
        const std::uint64_t bytes = measured ? t.result.host_memory.peak : e ? e->host_memory.peak : 0;
        row.push_back(bytes > 0 ? bytes_text(bytes) : "-");
    }
    if (notes) row.push_back(risk_cell_text(t.result.config));
    return row;
}

// "ties within noise: trial 12 (#1), trial 7 (#2)": their throughputs are not told apart by the
// noise of their step times, so the ranking between them is not a measurement.
void print_ties(const BestAnswer& a) {
    if (a.tied_with_best.empty()) return;
    std::vector<std::string> names;
    for (TrialId id : a.tied_with_best) {
        std::string name = fmt::format("trial {}", id);
        for (std::size_t i = 0; i < a.ranked.size(); ++i)
            if (a.ranked[i].id == id) name += fmt::format(" (#{})", i + 1);
        names.push_back(std::move(name));
    }
    fmt::print(
        "Ties within noise: {} (throughput intervals from median step time +/- {:g} x stddev / sqrt(timed "
        "steps) overlap; the order among them is not measured)\n",
        fmt::join(names, ", "), kNoiseSigmas);
}

// The best configuration with a convergence risk, when it outranked the answer: what it gains and why not.
void print_alternative(const BestAnswer& a, BestBy by) {
    if (!a.risky_alternative) return;
    const TrialRecord& t = *a.risky_alternative;
    fmt::print(
        "Alternative with a {}: trial {} of {} ({}): {} over the best; {}. --allow-risk ranks it with the "
        "rest.\n",
        kConvergenceRiskLabel, t.id, t.sweep_name, summary(t.result.config), alternative_gain(a, by),
        *convergence_risk(t.result.config));
}

// What answering for a stack means, and what it left out.
void print_framework(const BestAnswer& a) {
    if (a.framework == "tune") return;
    const std::string name = printable(a.framework);  // from the database
    fmt::print(
        "Answering for {}: a configuration qualifies when {} can run it and its predicted device memory (as "
        "nvidia-smi shows it) fits the sweep's limit; the peak column is that prediction{}.\n",
        name, name, a.basis == Basis::measured ? ", tokens/s is our engine's measurement of the configuration" : "");
    if (a.framework_cannot_run + a.framework_does_not_fit > 0)
        fmt::print("Left out for {}: {} it cannot run, {} predicted not to fit.\n", name, a.framework_cannot_run,
                   a.framework_does_not_fit);
    if (a.framework_unpredicted > 0)
        fmt::print(
            "{} configurations were recorded before tune kept {}'s predictions: they rank with our engine's "
            "numbers (run the sweep again to predict them).\n",
            a.framework_unpredicted, name);
}

void print_answer(const BestAnswer& a, BestBy by) {
    const bool measured = a.basis == Basis::measured;
    std::vector<std::string> header{"#", "front", "sweep", "trial"};
    for (const char* h : {"tokens/s", "peak", "step s", "MFU"})
        header.push_back(measured ? h : fmt::format("est. {}", h));
    // Under a stack the peak is its predicted device memory, whatever the basis.
    if (a.framework != "tune") header[5] = fmt::format("{} peak (pred.)", a.framework);
    for (auto& h : config_header({"gpus"})) header.push_back(std::move(h));
    std::vector<const TrialConfig*> configs;
    for (const TrialRecord& t : a.ranked) configs.push_back(&t.result.config);
    const bool notes = any_risk(configs);
    const bool host =
        std::any_of(configs.begin(), configs.end(), [](const TrialConfig* c) { return c->offload != Offload::none; });
    if (host) header.push_back(measured ? "host" : "est. host");
    if (notes) header.emplace_back("note");
    TextTable table(header);
    for (std::size_t i = 0; i < a.ranked.size(); ++i)
        table.add_row(row_of(i + 1, a.ranked[i], a.on_front[i], a.basis, notes, host));
    if (measured)
        fmt::print(
            "Best of {} qualifying configurations ({} measured ok; front: on the Pareto front of peak memory\n"
            "against tokens/s among those that qualify):\n{}",
            a.qualifying, a.measured_ok, table.render("  "));
    else
        fmt::print(
            "Predicted best of {} qualifying configurations (predicted: estimates only, not measured; {} "
            "unmeasured\nconfigurations are predicted to fit; front: on the predicted Pareto front among those "
            "that qualify):\n{}",
            a.qualifying, a.measured_ok, table.render("  "));
    fmt::print("{}", risk_footnotes(configs));
    print_framework(a);
    print_alternative(a, by);
    print_ties(a);
    fmt::print("Reproduce the best{}:\n  {}\n", measured ? "" : " (predicted; run it to measure it)",
               trial_command(a.ranked.front().result.config));
}

void print_why(const BestAnswer& a, std::string_view title) {
    fmt::print("{}:\n", title);
    for (const auto& why : a.why_none) fmt::print("  - {}\n", printable(why));
}

nlohmann::json answer_json(const BestAnswer& a, BestBy by) {
    if (a.ranked.empty())
        return {{"best", nullptr}, {"basis", to_string(a.basis)}, {"why", a.why_none}, {"framework", a.framework}};
    auto ranked_json = [&](std::size_t i) {
        nlohmann::json j = record_json(a.ranked[i]);
        j["on_front"] = static_cast<bool>(a.on_front[i]);
        j["basis"] = to_string(a.basis);
        if (a.ranked[i].answered_for) j["framework_prediction"] = *a.ranked[i].answered_for;
        if (const auto risk = convergence_risk(a.ranked[i].result.config)) j["convergence_risk"] = *risk;
        return j;
    };
    nlohmann::json runners = nlohmann::json::array();
    for (std::size_t i = 1; i < a.ranked.size(); ++i) runners.push_back(ranked_json(i));
    nlohmann::json alternative = nullptr;
    if (a.risky_alternative) {
        alternative = record_json(*a.risky_alternative);
        alternative["convergence_risk"] = *convergence_risk(a.risky_alternative->result.config);
        alternative["gain"] = alternative_gain(a, by);
    }
    return {{"best", ranked_json(0)},
            {"basis", to_string(a.basis)},
            {"command", trial_command(a.ranked.front().result.config)},
            {"runners_up", runners},
            {"risky_alternative", alternative},
            {"ties_within_noise", a.tied_with_best},
            {"qualifying", a.qualifying},
            {"framework", a.framework}};
}

// The measured answer first (its keys at the top level, as before); the predicted one beside it.
void print_json(const BestAnswer& measured, const BestAnswer& predicted, BestBy by) {
    nlohmann::json out = answer_json(measured, by);
    out["measured_ok"] = measured.measured_ok;
    out["predicted"] = answer_json(predicted, by);
    fmt::print("{}\n", dump_json(out));
}

int run_best(const BestOptions& o) {
    const BestQuery query = to_query(o);
    const Store store = Store::open_reader(reader_database(o.db));
    const BestAnswer measured = find_best(store, query);
    const BestAnswer predicted = find_best_predicted(store, query);
    const bool any = !measured.ranked.empty() || !predicted.ranked.empty();
    if (!o.emit.empty()) {
        print_ranked_out(measured, o.emit);
        print_ranked_out(predicted, o.emit);
    }
    if (!o.emit.empty() && any) {
        const BestAnswer& a = measured.ranked.empty() ? predicted : measured;
        print_emit(o.emit, a.ranked.front().result.config,
                   fmt::format("the best {} configuration: trial {} of sweep {}", to_string(a.basis),
                               a.ranked.front().id, a.ranked.front().sweep_name));
        return kExitOk;
    }
    if (o.json) {
        print_json(measured, predicted, query.by);
        return any ? kExitOk : kExitNo;
    }
    if (!any) {
        print_why(measured, "Nothing qualifies");
        const bool left_out = predicted.framework_cannot_run + predicted.framework_does_not_fit > 0;
        if (predicted.measured_ok > 0 || left_out) print_why(predicted, "Nor among the predictions");
        return kExitNo;
    }
    if (!measured.ranked.empty())
        print_answer(measured, query.by);
    else
        print_why(measured, "Nothing measured qualifies");
    if (!predicted.ranked.empty()) {
        fmt::print("\n");
        print_answer(predicted, query.by);
    }
    return kExitOk;
}

}  // namespace

void add_best_command(CLI::App& app, int& exit_code) {
    auto* cmd = app.add_subcommand(
        "best",
        "The best configuration that meets the constraints: measured first, then the best predicted\n"
        "(estimates only, labelled \"predicted\") among the configurations not measured, e.g. of an\n"
        "estimate-only sweep. Configurations without a convergence risk rank first (--allow-risk: together).\n"
        "Exit 0 when something qualifies, 1 when nothing does.");
    auto o = std::make_shared<BestOptions>();
    add_database_flags(cmd, o->db);
    cmd->add_option("--sweep", o->sweep, "Only this sweep (default: every sweep)");
    cmd->add_option("--max-memory", o->max_memory,
                    "Peak per GPU (measured, or predicted) at most this, e.g. 40GiB (a unit is required)");
    cmd->add_option("--max-host-memory", o->max_host_memory,
                    "Host memory per node that --offload keeps there (measured, or predicted) at most this, e.g. "
                    "256GiB");
    cmd->add_option("--min-context", o->min_context, "Context length at least this");
    without_default(cmd->add_option("--gpus", o->gpus, "Exactly this many GPUs (ranks)"));
    add_dimension_flags(cmd, o->dims, nullptr, "Only this value: ");
    cmd->add_option("--by", o->by, "Rank by tokens_per_s (default) or peak_memory")
        ->check(CLI::IsMember({"tokens_per_s", "peak_memory"}));
    cmd->add_option("--top", o->top, "How many to show, the best included (default 5)")->check(CLI::PositiveNumber);
    cmd->add_flag("--json", o->json, "Print JSON");
    cmd->add_flag("--allow-risk", o->allow_risk,
                  "Rank configurations with a convergence risk (pure bf16: no fp32 master weights) with the rest; by "
                  "default those without one come first and the best risky one is shown as an alternative");
    add_emit_flag(cmd, o->emit)->excludes("--json");
    cmd->add_option("--framework", o->framework,
                    "Answer for the stack you train with (tune estimate --framework explains each): a configuration "
                    "qualifies when that stack can run it and its predicted device memory fits the sweep's limit, and "
                    "peaks are that prediction. Default: the sweep's [framework] name, else with --emit F, F's stack; "
                    "'tune' is our engine's own numbers")
        ->check(CLI::IsMember(framework_flag_choices()));
    cmd->callback([&exit_code, o] { exit_code = run_best(*o); });
}

}  // namespace tune::cli
