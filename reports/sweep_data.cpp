#include "reports/sweep_data.h"

#include <algorithm>
#include <cmath>
#include <unordered_map>

#include <fmt/format.h>

#include "core/config_error.h"
#include "core/pareto.h"
#include "reports/predicted_front.h"
#include "store/store.h"

namespace tune {
namespace {

std::string known_sweeps(const Store& store) {
    std::string names;
    for (const auto& s : store.sweeps()) names += (names.empty() ? "" : ", ") + s.record.name;
    return names.empty() ? std::string("none") : names;
}

// The limit the trials ran under: the largest explicit allocator limit, which
// is what "fits" meant for this sweep, or the device's memory when none was set.
std::uint64_t memory_limit_of(const SweepData& data) {
    std::uint64_t limit = 0;
    for (const auto& t : data.trials) limit = std::max(limit, t.result.config.memory_limit);
    return limit != 0 ? limit : data.summary.record.device.memory_bytes;
}

// The measured front of the loaded trials (core/pareto's one rule).
std::vector<std::size_t> front_indices(const SweepData& data) {
    std::vector<std::optional<ParetoPoint>> points;
    for (const TrialRecord& t : data.trials) points.push_back(measured_point(t.result));
    return front_of(points);
}

std::vector<std::size_t> predicted_front_indices(const SweepData& data) {
    const std::vector<PredictedRow> rows = predicted_rows(data.trials);
    std::unordered_map<TrialId, std::size_t> index;
    for (std::size_t i = 0; i < data.trials.size(); ++i) index.emplace(data.trials[i].id, i);
    std::vector<std::size_t> out;
    for (std::size_t i : predicted_front(rows)) out.push_back(index.at(rows[i].trial));
    return out;
}

}  // namespace

SweepData load_sweep_data(const Store& store, std::string_view name) {
    auto summary = store.find_sweep(name);
    if (!summary)
        throw ConfigError(
            fmt::format("no sweep named \"{}\" in {} (it has: {})", name, store.path(), known_sweeps(store)));
    SweepData data;
    data.summary = std::move(*summary);
    TrialQuery query;
    query.sweep = data.summary.id;
    query.with_memory = true;
    data.trials = store.trials(query);
    data.front = front_indices(data);
    data.predicted_front = predicted_front_indices(data);
    data.memory_limit = memory_limit_of(data);
    return data;
}

std::vector<std::string> resolve_sweep_names(const Store& store, std::span<const std::string> requested) {
    std::vector<std::string> names;
    for (const auto& n : requested)
        if (std::find(names.begin(), names.end(), n) == names.end()) names.push_back(n);
    if (!names.empty()) return names;
    const auto all = store.sweeps();
    if (all.empty()) throw ConfigError(fmt::format("{} holds no sweeps yet", store.path()));
    const auto latest = std::max_element(all.begin(), all.end(), [](const auto& a, const auto& b) {
        return std::pair(a.record.created_at, a.id) < std::pair(b.record.created_at, b.id);
    });
    return {latest->record.name};
}

std::vector<SweepData> load_sweeps(const Store& store, std::span<const std::string> names) {
    std::vector<SweepData> out;
    out.reserve(names.size());
    for (const auto& n : names) out.push_back(load_sweep_data(store, n));
    return out;
}

}  // namespace tune
