// One trial as a child process of the sweep: the command that starts it
// (through the launcher for several ranks), and the TrialResult its outcome
// amounts to, both by the protocol in core/trial_protocol.h. The status comes
// from the trial's JSON result and, without one, from how the process ended
// (exit code, signal, timeout); never from words in its log.
#pragma once

#include <string>
#include <vector>

#include "core/config.h"
#include "core/trial_protocol.h"
#include "driver/slots.h"
#include "launch/job_step.h"
#include "launch/process.h"
#include "sweep/spec.h"

namespace tune {

// argv for `tune trial --config <json> --json`, wrapped by mpirun/srun when the
// trial has several ranks. `trial_program` is e.g. {"/path/to/tune", "trial"}.
std::vector<std::string> trial_argv(const TrialConfig& config, const SweepSpec& spec,
                                    const std::vector<std::string>& trial_program);

// The same trial confined to slot `slot` of `layout`: an srun job step inside Slurm, else
// its GPU and core sets through the environment and the CPU affinity.
StepCommand trial_step(const TrialConfig& config, const SweepSpec& spec, const std::vector<std::string>& trial_program,
                       const SlotLayout& layout, std::size_t slot);

// A process outcome in the protocol's terms (`tune trial --gpus N` reads its ranks with it too).
ChildEnd child_end(const ProcessOutcome& outcome);

// What a finished trial process means. `claimed` is the configuration that was
// run; the result always carries it, and `estimate` (the sweep's own, when it
// has one) rather than the estimate the trial made with default settings.
// `planned` with the process baseline the trial measured (its own estimate's `overhead`)
// where the plan had none yet: the CPU baseline is known only after a trial.
Estimate with_measured_baseline(Estimate planned, const std::optional<Estimate>& own);

TrialResult interpret_outcome(const ProcessOutcome& outcome, const TrialConfig& claimed,
                              const std::optional<Estimate>& estimate);

}  // namespace tune
