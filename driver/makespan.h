// How long a sweep will take before it runs: every trial the plan keeps,
// timed from its estimate (start-up plus warmup and measured steps), packed in
// the plan's run order onto the slots the resources give (driver/slots) the way
// the driver fills them: each trial starts on the slot that frees first. Lets a
// user see before submitting whether the sweep fits the night; after a run the
// report sets the prediction beside the real duration.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include <nlohmann/json.hpp>

#include "driver/slots.h"
#include "driver/trial_cost.h"
#include "store/records.h"
#include "store/store.h"
#include "sweep/spec.h"

namespace tune {

struct MakespanPrediction {
    double makespan_s = 0;  // first start to last end
    double serial_s = 0;    // the same trials one at a time
    std::uint32_t slots = 1;
    std::uint32_t nodes = 1;
    std::uint64_t trials = 0;
};

// Wall time of one trial process from its estimate, with the prior fixed part (driver/trial_cost).
double predicted_trial_s(const Estimate& e, const SweepSpec& spec);

// `plan` as plan_trials returns it; only pending trials run, lowest priority value first.
MakespanPrediction predict_makespan(std::span<const NewTrial> plan, const SweepSpec& spec, std::uint32_t slots,
                                    std::uint32_t nodes);
// The same with a trial's cost as learned so far (driver/trial_cost): what is left of a running sweep.
MakespanPrediction predict_makespan(std::span<const NewTrial> plan, const TrialCost& cost, std::uint32_t slots,
                                    std::uint32_t nodes);

nlohmann::json to_json(const MakespanPrediction& p);

// Keeps the prediction for a new sweep in its plan ("makespan"), for the report to compare with
// the real duration once the trials ran.
void record_makespan_prediction(Store& store, SweepId sweep, const std::string& name, std::span<const NewTrial> plan,
                                const SweepSpec& spec, const SlotLayout& layout);

// `tune sweep --plan-only [--nodes N]`: the sweep planned (nothing run, nothing stored) and packed
// onto `nodes` nodes of an allocation like this one (nullopt: where it would run now).
// A GPU sweep planned where no GPU is visible assumes [resources] gpus_per_node, else one trial per node.
MakespanPrediction plan_makespan(SweepSpec spec, std::size_t visible_gpus, std::optional<std::uint32_t> nodes);

}  // namespace tune
