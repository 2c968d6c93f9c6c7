// The part of a sweep that runs trials: claim the next pending trial in the
// plan's order (Pareto-first or grid) whenever a slot is free, start it in that
// slot's share of the machine, record each outcome as it arrives, recalibrate
// and re-plan the pending ones. Several trials run at once when the sweep's
// [resources] allow (driver/slots); this thread alone writes the store.
#pragma once

#include "driver/slots.h"
#include "driver/sweep.h"
#include "store/store.h"

namespace tune {

void run_trials(const SweepSpec& spec, const SweepOptions& options, const SlotLayout& layout, Store& store,
                SweepId sweep, SweepReport& report);

}  // namespace tune
