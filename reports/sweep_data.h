// One sweep as the reports see it: its record and status counts, every trial
// with its per-component memory, and which trials form the measured Pareto
// front and the predicted one. Loaded once per report; every section reads from it.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "store/records.h"

namespace tune {

class Store;

struct SweepData {
    SweepSummary summary;
    std::vector<TrialRecord> trials;  // by trial id
    std::vector<std::size_t> front;   // indices into `trials`, by increasing peak memory
    // The predicted front of the trials not measured (reports/predicted_front's rule):
    // indices into `trials`, by increasing predicted peak; every one predicted to fit.
    std::vector<std::size_t> predicted_front;
    std::uint64_t memory_limit = 0;  // per device: the trials' allocator limit, else the device's memory

    const std::string& name() const { return summary.record.name; }
};

// Throws ConfigError naming the sweeps the database has when `name` is not one of them.
SweepData load_sweep_data(const Store& store, std::string_view name);

// The sweeps a report covers: the ones asked for, in that order (duplicates
// dropped), or the most recently created one when none is asked for. Throws
// ConfigError when the database has no sweeps or a name is unknown.
std::vector<std::string> resolve_sweep_names(const Store& store, std::span<const std::string> requested);

std::vector<SweepData> load_sweeps(const Store& store, std::span<const std::string> names);

}  // namespace tune
