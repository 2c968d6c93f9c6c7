#include "driver/sweep.h"

#include <chrono>

#include <fmt/format.h>

#include "launch/launch.h"
#include "launch/process.h"
#include "driver/calibration.h"
#include "driver/lease.h"
#include "driver/plan.h"
#include "driver/progress.h"
#include "driver/trial_child.h"
#include "probe/sweep_probes.h"
#include "search/estimate.h"
#include "search/space.h"
#include "core/config_error.h"
#include "core/units.h"
#include "store/store.h"

namespace tune {
namespace {

SweepRecord sweep_record(const SweepSpec& spec, const SweepEnvironment& env) {
    SweepRecord r;
    r.name = spec.name;
    r.spec_text = spec.text;
    r.spec_hash = spec.text_hash;
    r.host = env.host;
    r.device = {env.device_name.empty() ? spec.hardware.device : env.device_name, spec.world_size(),
                spec.hardware.memory_bytes};
    r.backend = to_string(spec.hardware.backend);  // the store keeps the text
    r.software = env.software;
    return r;
}

StatusCounts counts_of(const Store& store, SweepId id) {
    for (const SweepSummary& s : store.sweeps())
        if (s.id == id) return s.counts;
    return {};
}

// Runs claimed trials until none is left or a limit says stop.
class SweepLoop {
public:
    SweepLoop(const SweepSpec& spec, const SweepOptions& options, Store& store, SweepId sweep, SweepReport& report)
        : spec_(spec), options_(options), store_(store), sweep_(sweep), report_(report),
          base_(base_estimate_options(spec)), calibration_(base_, options.prune_tolerance),
          planned_with_(calibration_),
          progress_(options.progress_line, options.json_events) {}

    void run() {
        const StatusCounts start = counts_of(store_, sweep_);
        std::uint64_t to_run = start[static_cast<std::size_t>(TrialStatus::pending)];
        if (options_.max_trials) to_run = std::min<std::uint64_t>(to_run, *options_.max_trials);
        progress_.start(spec_.name, to_run, start);
        const auto began = std::chrono::steady_clock::now();
        while (!stop_before_next(began)) {
            auto claimed = store_.claim_next_pending(sweep_, ClaimOrder::priority);
            if (!claimed) break;
            if (!run_one(*claimed)) break;
        }
        progress_.finish();
        report_.efficiency_factor = calibration_.efficiency_factor();
        report_.memory_errors = calibration_.memory_errors();
    }

private:
    bool stop_before_next(std::chrono::steady_clock::time_point began) {
        if (interrupts_.poll() > 0) {
            report_.interrupted = true;
            return true;
        }
        if (options_.max_trials && report_.trials_run >= *options_.max_trials) {
            report_.max_trials_reached = true;
            return true;
        }
        if (spec_.budget_s) {
            const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - began).count();
            if (elapsed + progress_.mean_trial_s().value_or(0.0) > *spec_.budget_s) {
                report_.budget_reached = true;
                return true;
            }
        }
        return false;
    }

    // Returns false when the sweep must stop (an interrupt killed the trial).
    bool run_one(const ClaimedTrial& claimed) {
        progress_.trial_started(claimed.id, summary(claimed.config));
        ProcessSpec process;
        process.argv = trial_argv(claimed.config, spec_, trial_program());
        process.timeout_s = spec_.trial.timeout_s;
        process.interrupts = &interrupts_;
        process.kill_at_interrupt = 2;  // the first Ctrl-C lets this trial finish; the second kills it
        const Timestamp started = now_timestamp();
        const ProcessOutcome outcome = run_process(process);
        const Timestamp ended = now_timestamp();
        if (outcome.interrupted) {
            store_.release(claimed.id, "interrupted by Ctrl-C; it runs again when the sweep resumes");
            report_.interrupted = true;
            progress_.note("interrupted: the running trial was stopped and will run again on resume");
            return false;
        }
        if (interrupts_.count() == 1 && !report_.interrupted)
            progress_.note("Ctrl-C: finishing the running trial, then stopping (Ctrl-C again to stop it now)");
        const TrialResult result = interpret_outcome(outcome, claimed.config, claimed.estimate);
        store_.record_result(claimed.id, result, outcome.stderr_tail, started, ended);
        ++report_.trials_run;
        progress_.trial_finished(claimed.id, result, outcome.wall_s);
        learn(result);
        return true;
    }

    void learn(const TrialResult& result) {
        if (result.status != TrialStatus::ok) return;
        calibration_.observe(result, estimate(spec_.model, result.config, spec_.hardware, base_));
        // Re-plan only when the model of the device moved enough to change decisions.
        if (calibration_.change_since(planned_with_) < 0.05) return;
        PlanSettings settings{calibration_.options(), calibration_.prune_tolerance(), strategy()};
        const auto pending = store_.trials({sweep_, TrialStatus::pending, false, false});
        store_.update_pending(replan_pending(spec_, pending, settings));
        planned_with_ = calibration_;
    }

    std::vector<std::string> trial_program() const {
        if (!options_.trial_program.empty()) return options_.trial_program;
        return {self_executable(), "trial"};
    }
    SearchStrategy strategy() const { return options_.strategy.value_or(spec_.strategy); }

    const SweepSpec& spec_;
    const SweepOptions& options_;
    Store& store_;
    SweepId sweep_;
    SweepReport& report_;
    EstimateOptions base_;
    Calibration calibration_;
    Calibration planned_with_;
    SweepProgress progress_;
    InterruptWatcher interrupts_;
};

}  // namespace

std::string estimate_only_reason(const SweepSpec& spec, const SweepEnvironment& env, bool dry_run) {
    if (dry_run) return "--dry-run was given";
    if (spec.hardware.backend != BackendKind::cuda) return {};
    if (env.visible_gpus == 0)
        return fmt::format("the sweep is for {} GPUs and none is visible here ({})", spec.hardware.device,
                           env.why_no_gpu.empty() ? "no CUDA device" : env.why_no_gpu);
    if (env.visible_gpus < spec.gpus)
        return fmt::format("each trial needs {} GPUs and {} are visible here", spec.gpus, env.visible_gpus);
    return {};
}

SweepReport run_sweep(SweepSpec spec, const SweepEnvironment& env, const SweepOptions& options) {
    SweepReport report;
    report.database = options.database.empty() ? spec.database : options.database;
    report.estimate_only_reason = estimate_only_reason(spec, env, options.dry_run);
    report.estimate_only = !report.estimate_only_reason.empty();
    const SearchStrategy strategy = options.strategy.value_or(spec.strategy);

    if (!report.estimate_only) {
        // Said before the database is touched: 4,194,304 CPU ranks, or 8 nodes without Slurm,
        // would otherwise fail trial after trial.
        const Launcher launcher = choose_launcher(spec.trial.launcher, spec.world_size());
        if (auto problem = placement_problem(launcher, spec.world_size(), spec.nodes))
            throw ConfigError(fmt::format("[hardware] gpus = {}, nodes = {}: the trials cannot be started here: {}",
                                          spec.gpus, spec.nodes, *problem));
    }
    Store store(report.database, Store::Mode::read_write);
    // Before open_sweep: a second driver would take the first one's running trial for one a
    // dead driver left behind, and run it again.
    const SweepLeaseHolder lease(store, report.database, spec.name, env.host);
    const OpenedSweep opened = store.open_sweep(sweep_record(spec, env), options.restart);
    report.sweep = opened.id;
    report.requeued = opened.requeued;

    // The time model's rates for this machine, measured once per host, version and device
    // (not for a dry run: a large model's GEMMs would take minutes to probe for estimates alone).
    if (options.probe && !report.estimate_only)
        spec.probed = probe::probes_for_sweep(spec, cpu_threads_per_rank(spec), &store,
                                              {env.host, probe::probe_software(env.software), ""}, false)
                          .rates;
    PlanSettings settings{base_estimate_options(spec), options.prune_tolerance, strategy};
    const std::vector<NewTrial> plan = plan_trials(spec, expand_space(spec), settings);
    store.add_trials(opened.id, plan);

    if (!report.estimate_only) SweepLoop(spec, options, store, opened.id, report).run();
    report.counts = counts_of(store, opened.id);
    return report;
}

}  // namespace tune
