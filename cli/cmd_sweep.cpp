// `tune sweep FILE` (or just `tune FILE.toml`): the whole sweep, then the
// measured Pareto front, the database and the report.
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <memory>
#include <sstream>
#include <string>

#include <fmt/format.h>

#include "build_info.h"
#include "cli/commands.h"
#include "cli/database_path.h"
#include "cli/device_query_child.h"
#include "core/environment.h"
#include "core/output_file.h"
#include "core/pareto.h"
#include "core/presets.h"
#include "core/units.h"
#include "driver/makespan.h"
#include "driver/sweep.h"
#include "estimate/estimate.h"
#include "estimate/memory_limit_check.h"
#include "launch/host_name.h"
#include "reports/html_report.h"
#include "reports/measured_front_text.h"
#include "reports/predicted_front.h"
#include "reports/report_format.h"
#include "store/store.h"
#include "train/memory/host_memory.h"

namespace tune::cli {
namespace {

struct SweepCliOptions {
    std::string file;
    std::string database;
    bool dry_run = false;
    std::uint64_t max_trials = 0;
    std::string strategy;
    bool restart = false;
    bool json = false;
    bool no_report = false;
    bool plan_only = false;
    std::uint32_t nodes = 0;  // with --plan-only: pack onto this many nodes
    bool probe = true;
};

// What this machine has, and the device an "auto" sweep runs on.
SweepEnvironment detect(SweepSpec& spec) {
    SweepEnvironment env;
    env.host = host_name();
    env.software.tune_version = TUNE_VERSION;
    env.software.git_commit = TUNE_GIT_COMMIT;
    const DeviceQuery q = query_devices_in_child();  // the sweep process never loads CUDA itself
    env.visible_gpus = q.devices.size();
    env.why_no_gpu = q.why_none;
    if (q.runtime_version)
        env.software.cuda = fmt::format("{}.{}", q.runtime_version / 1000, q.runtime_version % 1000 / 10);
    if (q.driver_version)
        env.software.driver = fmt::format("{}.{}", q.driver_version / 1000, q.driver_version % 1000 / 10);
    std::optional<Hardware> detected;
    if (!q.devices.empty()) {
        env.device_name = q.devices.front().name;
        detected = match_device(q.devices.front().name, q.devices.front().total_memory);
    }
    resolve_auto_device(spec, detected, train::host_total_bytes());
    if (env.device_name.empty() || spec.device != "auto") env.device_name = spec.hardware.device;
    return env;
}

// The front of the trials that finished ok (core/pareto's rule, as `tune report` draws it).
std::vector<TrialRecord> measured_front(const Store& store, SweepId sweep) {
    auto ok = store.trials({sweep, TrialStatus::ok, false, false});
    std::vector<std::optional<ParetoPoint>> points;
    for (const TrialRecord& t : ok) points.push_back(measured_point(t.result));
    std::vector<TrialRecord> front;
    for (std::size_t i : front_of(points)) front.push_back(std::move(ok[i]));
    return front;
}

void print_measured_front(const Store& store, SweepId sweep) {
    const auto front = measured_front(store, sweep);
    if (front.empty()) {
        fmt::print("No configuration was measured as ok, so there is no measured front.\n");
        return;
    }
    fmt::print("{}", measured_front_text(front));
}

// The estimator's front of what was not measured (reports/predicted_front: `tune estimate FILE` prints the same).
void print_predicted_front(const Store& store, SweepId sweep) {
    const auto trials = store.trials({sweep, std::nullopt, false, false});
    const auto rows = predicted_rows(trials);
    fmt::print("{}", predicted_front_text(rows, predicted_front(rows)));
}

void print_counts(const SweepReport& r) {
    auto n = [&](TrialStatus s) { return r.counts[static_cast<std::size_t>(s)]; };
    std::uint64_t total = 0;
    for (auto c : r.counts) total += c;
    fmt::print("{} configurations: {} ok, {} oom, {} failed, {} timeout, {} pruned, {} invalid, {} pending\n", total,
               n(TrialStatus::ok), n(TrialStatus::oom), n(TrialStatus::failed), n(TrialStatus::timeout),
               n(TrialStatus::pruned), n(TrialStatus::invalid), n(TrialStatus::pending) + n(TrialStatus::running));
}

// What the estimates of the trials still to run were corrected by; the
// exponents print as the prior until the trials varied enough to fit them.
void print_calibration(const SweepReport& r) {
    if (r.calibrated_trials == 0) return;
    const auto fitted = [](double value, double prior) {
        return value == prior ? fmt::format("{:g} (the prior: too little variation to fit)", prior)
                              : fmt::format("{:.2f}", value);
    };
    fmt::print(
        "Calibration from {} ok trial(s): measured speed {:.2f}x the estimate's; a step slows as the speed "
        "reference's time to the power {}; speed over the estimate grows as a micro-batch's tokens to the power {}.\n",
        r.calibrated_trials, r.efficiency_factor, fitted(r.pace_exponent, r.pace_prior), fitted(r.size_exponent, 0.0));
}

int print_plan(const SweepSpec& spec, const SweepEnvironment& env, std::uint32_t nodes) {
    const MakespanPrediction p =
        plan_makespan(spec, env.visible_gpus, nodes ? std::optional<std::uint32_t>(nodes) : std::nullopt);
    fmt::print("{} trials to run, {} at a time on {} node(s)\n", p.trials, p.slots, p.nodes);
    fmt::print("Predicted makespan: {} (one at a time: {})\n", format_duration(p.makespan_s),
               format_duration(p.serial_s));
    if (spec.budget_s)
        fmt::print(
            "[search] budget {}: {}\n", format_duration(*spec.budget_s),
            p.makespan_s <= *spec.budget_s ? "fits" : "does not fit; the sweep stops starting trials at the budget");
    return kExitOk;
}

int run(SweepCliOptions& o) {
    SweepSpec spec = load_sweep(o.file);
    SweepEnvironment env = detect(spec);
    if (spec.memory_limit_setting)
        if (auto w = limit_above_device(*spec.memory_limit_setting, spec.hardware))
            fmt::print(stderr, "warning: {}\n", *w);
    if (auto note = host_memory_note(spec)) fmt::print("note: {}\n", *note);
    if (o.plan_only) return print_plan(spec, env, o.nodes);
    SweepOptions options;
    options.database = sweep_database(spec, o.database);
    options.dry_run = o.dry_run;
    if (o.max_trials > 0) options.max_trials = o.max_trials;
    if (!o.strategy.empty()) options.strategy = parse_strategy(o.strategy);  // the flag allows only the names
    options.restart = o.restart;
    options.probe = o.probe;
    options.json_events = o.json;
    options.progress_line = !o.json;
    // Test hook: the sweep driver's tests stand a script in for `tune trial`.
    if (const char* program = std::getenv("TUNE_TRIAL_PROGRAM"); program && *program) {
        std::istringstream words(program);
        for (std::string w; words >> w;) options.trial_program.push_back(w);
        // ... and, for a GPU sweep in a build or on a machine without CUDA, says how many GPUs to
        // hand out (the slurm test's stand-in GRES GPUs), since the stand-in needs none.
        if (const auto gpus = environment_integer("TUNE_TEST_GPUS", 0, 1 << 16); gpus && env.visible_gpus == 0)
            env.visible_gpus = static_cast<std::size_t>(*gpus);
    }
    // A report path that cannot be written must fail now, not after hours of trials.
    if (!o.no_report) check_output_path(spec.report, "the report");
    const SweepReport r = run_sweep(spec, env, options);

    if (o.json) return kExitOk;  // the events said everything
    if (r.requeued.pending + r.requeued.failed > 0)
        fmt::print(
            "Resumed: {} trial(s) left running by an earlier run were queued again ({} given up after {} attempts)\n",
            r.requeued.pending, r.requeued.failed, kMaxAttempts);
    print_counts(r);
    Store store(r.database, Store::Mode::read_only);
    if (r.estimate_only) {
        fmt::print("Nothing was measured: {}. Every configuration was estimated and recorded.\n",
                   r.estimate_only_reason);
        print_predicted_front(store, r.sweep);
    } else {
        fmt::print("Ran {} trial(s) this time{}{}{}.\n", r.trials_run,
                   r.interrupted ? "; interrupted (run the same command to resume)" : "",
                   r.budget_reached ? "; stopped at the [search] budget" : "",
                   r.max_trials_reached ? "; stopped at --max-trials" : "");
        print_calibration(r);
        print_measured_front(store, r.sweep);
    }
    fmt::print("Database: {}\n", r.database);
    if (!o.no_report) {
        const std::string names[] = {spec.name};
        write_html_report(store, names, spec.report);
        fmt::print("Report:   {}\n", spec.report);
    }
    return r.interrupted ? 130 : kExitOk;
}

}  // namespace

void add_sweep_command(CLI::App& app, int& exit_code) {
    auto o = std::make_shared<SweepCliOptions>();
    auto* cmd = app.add_subcommand(
        "sweep",
        "Run a sweep: enumerate, estimate, prune, run the survivors as trials, record, report.\n"
        "`tune FILE.toml` is the same as `tune sweep FILE.toml`. Re-running resumes; Ctrl-C once lets the\n"
        "running trial finish, twice stops it (it runs again on resume). Exit 0 when done, 130 when interrupted.");
    cmd->add_option("file", o->file, "Sweep file (TOML), e.g. sweeps/demo.toml")->required();
    cmd->add_option(
        "--db", o->database,
        "Results database (default: the sweep's [output] database, relative to the file, else $TUNE_DB, else tune.db)");
    cmd->add_flag("--dry-run", o->dry_run, "Estimate and record every configuration, run nothing");
    cmd->add_option("--max-trials", o->max_trials, "Run at most this many trials now (0: no limit)")
        ->check(CLI::NonNegativeNumber);
    cmd->add_option("--strategy", o->strategy, "Run order: pareto-first (default) or grid")
        ->check(CLI::IsMember(std::vector<std::string>(kSearchStrategyNames.begin(), kSearchStrategyNames.end())));
    cmd->add_flag("--restart", o->restart, "Discard an existing sweep of the same name and start again");
    cmd->add_flag("--json", o->json, "Stream JSON events on stdout instead of tables");
    cmd->add_flag("--no-report", o->no_report, "Do not write the HTML report");
    cmd->add_flag("--plan-only", o->plan_only,
                  "Predict the makespan (estimated trial times packed onto the slots [resources] gives), run nothing");
    without_default(cmd->add_option("--nodes", o->nodes,
                                    "With --plan-only: pack onto this many nodes, as `tune submit --nodes N` would"))
        ->check(CLI::Range(1, 4096));
    // On by default: without probes a sweep's first estimates rest on the device's nominal peaks, far
    // from any one machine until calibration has learnt it from the trials.
    cmd->add_flag("--probe,!--no-probe", o->probe,
                  "Estimate step time from rates probed here at start (`tune probe`: GEMMs per pass, attention, "
                  "element-wise ops, optimizers, collectives; a few seconds, cached in the database per host, "
                  "version and device). On by default for sweeps that run trials; --no-probe uses the device's "
                  "nominal peaks instead");
    cmd->callback([o, &exit_code] { exit_code = run(*o); });
}

}  // namespace tune::cli
