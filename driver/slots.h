// How many trials of a sweep run at once, and where each runs: the sweep's
// [resources] (or the allocation, for "auto") divided by what one trial takes
// ([hardware] gpus x nodes ranks; on the CPU backend a core per rank at least).
// Without a [resources] section there is one slot: trials run one at a time,
// with every core, as before the section existed.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "launch/allocation.h"
#include "launch/job_step.h"
#include "sweep/spec.h"

namespace tune {

struct SlotLayout {
    Launcher launcher = Launcher::local;
    std::uint32_t nodes = 1;             // the nodes the slots spread over
    std::uint32_t threads_per_rank = 1;  // CPU backend: OpenMP threads each rank runs
    std::vector<StepResources> slots;    // one per trial that may run at once (never empty)
    std::string description;             // "2 at a time: 2 cores, 1 per trial"
};

SlotLayout slot_layout(const SweepSpec& spec, const Allocation& allocation);

}  // namespace tune
