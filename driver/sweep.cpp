#include "driver/sweep.h"

#include <fmt/format.h>

#include "core/config_error.h"
#include "core/units.h"
#include "driver/collective_probes.h"
#include "driver/lease.h"
#include "driver/makespan.h"
#include "driver/plan.h"
#include "driver/slots.h"
#include "driver/sweep_loop.h"
#include "estimate/estimate.h"
#include "launch/allocation.h"
#include "launch/launch.h"
#include "probe/sweep_probes.h"
#include "store/store.h"
#include "sweep/space.h"

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
    r.framework = std::string(to_string(spec.framework));
    return r;
}

StatusCounts counts_of(const Store& store, SweepId id) {
    for (const SweepSummary& s : store.sweeps())
        if (s.id == id) return s.counts;
    return {};
}

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
        // A CPU sweep's threads per rank come from [resources] cpus: more cores than this
        // process may use would give every trial threads `tune trial` refuses.
        const Allocation here = detect_allocation(env.visible_gpus);
        if (spec.hardware.backend == BackendKind::cpu && !here.in_slurm && spec.resources.cpus &&
            *spec.resources.cpus > here.cpus.size())
            throw ConfigError(
                fmt::format("[resources] cpus = {}: this process may run on {} core(s) here; give at "
                            "most that, or leave cpus out to use them all (validate, --plan-only and "
                            "submit still take the file for a cluster)",
                            *spec.resources.cpus, here.cpus.size()));
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
    // Collectives at the sweep's world sizes run as ranks under its launcher, as trials do.
    if (options.probe && !report.estimate_only) {
        const std::uint32_t threads = cpu_threads_per_rank(spec);
        const probe::ProbeSettings probe_settings;
        spec.probed =
            probe::probes_for_sweep(
                spec, threads, &store, {env.host, probe::probe_software(env.software), ""}, false, probe_settings,
                collective_prober(spec, {self_executable(), "probe-collectives"}, probe_settings.min_seconds, threads))
                .rates;
    }
    PlanSettings settings{base_estimate_options(spec), options.prune_tolerance, strategy};
    const std::vector<NewTrial> plan = plan_trials(spec, expand_space(spec), settings);
    store.add_trials(opened.id, plan);

    const SlotLayout layout = slot_layout(spec, detect_allocation(env.visible_gpus));
    if (opened.created && !report.estimate_only)
        record_makespan_prediction(store, opened.id, spec.name, plan, spec, layout);
    if (!report.estimate_only) run_trials(spec, options, layout, store, opened.id, report);
    report.counts = counts_of(store, opened.id);
    return report;
}

}  // namespace tune
