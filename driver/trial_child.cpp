#include "driver/trial_child.h"

#include "core/parallel_plan.h"
#include "core/trial_protocol.h"
#include "driver/plan.h"
#include "launch/launch.h"

namespace tune {

namespace {

std::vector<std::string> rank_argv(const TrialConfig& config, const SweepSpec& spec,
                                   const std::vector<std::string>& trial_program) {
    TrialChildFlags flags;
    flags.json = true;
    // The sweep already pruned with its estimate and known error: a trial it
    // keeps near the limit runs, and a real OOM is what it came to measure.
    flags.force = true;
    // The same thread count the estimator was given (see cpu_threads_per_rank).
    if (spec.hardware.backend == BackendKind::cpu) flags.threads = static_cast<int>(cpu_threads_per_rank(spec));
    flags.noise = spec.trial.noise;
    return trial_child_argv(trial_program, config, flags);
}

}  // namespace

std::vector<std::string> trial_argv(const TrialConfig& config, const SweepSpec& spec,
                                    const std::vector<std::string>& trial_program) {
    const Launcher launcher = choose_launcher(spec.trial.launcher, parallel_plan(config).world());
    return launch_command(launcher, parallel_plan(config).world(), rank_argv(config, spec, trial_program));
}

StepCommand trial_step(const TrialConfig& config, const SweepSpec& spec, const std::vector<std::string>& trial_program,
                       const SlotLayout& layout, std::size_t slot) {
    StepResources resources = layout.slots.at(slot);
    resources.ranks = parallel_plan(config).world();
    // sacct then tells which configuration each step ran (the store's config_hash).
    resources.name = "tune-trial-" + config_hash(config);
    return job_step(layout.launcher, resources, rank_argv(config, spec, trial_program));
}

ChildEnd child_end(const ProcessOutcome& outcome) {
    return ChildEnd{outcome.timed_out, outcome.spawn_failed, outcome.exit_code,  outcome.term_signal,
                    outcome.wall_s,    outcome.describe(),   outcome.stderr_tail};
}

TrialResult interpret_outcome(const ProcessOutcome& outcome, const TrialConfig& claimed,
                              const std::optional<Estimate>& estimate) {
    TrialResult r = read_child_result(outcome.stdout_text, child_end(outcome), claimed);
    // The estimate the sweep planned this trial with (its settings: margin,
    // calibration) is the one whose error the store shows; the trial's own
    // (default settings) only stands in when the driver had none.
    if (estimate) r.estimate = with_measured_baseline(*estimate, r.estimate);
    return r;
}

Estimate with_measured_baseline(Estimate planned, const std::optional<Estimate>& own) {
    // On the CPU the process's baseline is the estimate's `overhead`, known only once a trial
    // has measured it: trials planned before the first result (every concurrent trial of the
    // first round) were planned without it, and their stored error would be the baseline itself.
    if (!own) return planned;
    const std::uint64_t measured = own->memory[Component::overhead];
    if (planned.memory[Component::overhead] != 0 || measured == 0) return planned;
    planned.memory[Component::overhead] = measured;
    planned.memory.peak += measured;  // the same bytes in every phase: the peak moves by them
    return planned;
}

}  // namespace tune
