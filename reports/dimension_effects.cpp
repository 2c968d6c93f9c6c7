#include "reports/dimension_effects.h"

#include <algorithm>
#include <functional>
#include <map>
#include <set>

#include "core/dimensions.h"
#include "core/parallel_plan.h"

namespace tune {
namespace {

// A searched dimension's value as a sort key (enum index or the number) and its label.
struct Searched {
    std::string name;
    std::function<std::uint64_t(const TrialConfig&)> key;
    std::function<std::string(const TrialConfig&)> label;
};

Searched searched(const Dimension& d) {
    return {std::string(d.name), [&d](const TrialConfig& c) { return std::uint64_t{d.get(c)}; },
            [&d](const TrialConfig& c) { return d.text(c); }};
}

// The dimension table's rows, then the world size (a sweep may compare several).
std::vector<Searched> searched_dimensions() {
    std::vector<Searched> out;
    for (const Dimension& d : dimensions()) out.push_back(searched(d));
    out.push_back({"world_size", [](const TrialConfig& c) { return std::uint64_t{parallel_plan(c).world()}; },
                   [](const TrialConfig& c) { return std::to_string(parallel_plan(c).world()); }});
    return out;
}

void count_into(DimensionValue& v, const TrialRecord& t) {
    ++v.trials;
    if (t.result.status == TrialStatus::oom) ++v.oom;
    if (t.result.status != TrialStatus::ok || !t.measured) return;
    ++v.ok;
    v.best_tokens_per_s = std::max(v.best_tokens_per_s.value_or(0.0), t.result.tokens_per_s);
    v.min_peak = std::min(v.min_peak.value_or(UINT64_MAX), t.result.memory.peak);
}

DimensionEffect effect_of(const Searched& d, const SweepData& sweep) {
    std::map<std::uint64_t, DimensionValue> by_key;
    for (const auto& t : sweep.trials) {
        auto [it, inserted] = by_key.try_emplace(d.key(t.result.config));
        if (inserted) it->second.value = d.label(t.result.config);
        count_into(it->second, t);
    }
    DimensionEffect e{d.name, {}};
    for (auto& [key, value] : by_key) e.values.push_back(std::move(value));
    return e;
}

}  // namespace

std::vector<DimensionEffect> dimension_effects(const SweepData& sweep) {
    std::vector<DimensionEffect> out;
    for (const auto& d : searched_dimensions()) out.push_back(effect_of(d, sweep));
    return out;
}

ContextEffect context_effect(const SweepData& sweep, const Dimension& group) {
    const Searched d = searched(group);
    std::set<std::uint32_t> contexts;
    std::map<std::uint64_t, std::string> groups;
    for (const auto& t : sweep.trials) {
        contexts.insert(t.result.config.context);
        groups.try_emplace(d.key(t.result.config), d.label(t.result.config));
    }
    ContextEffect e{d.name, {contexts.begin(), contexts.end()}, {}};
    std::map<std::uint64_t, std::size_t> curve_of;
    for (const auto& [key, label] : groups) {
        curve_of[key] = e.curves.size();
        e.curves.push_back({label, std::vector<std::optional<double>>(e.contexts.size()),
                            std::vector<std::optional<std::uint64_t>>(e.contexts.size())});
    }
    for (const auto& t : sweep.trials) {
        if (t.result.status != TrialStatus::ok || !t.measured) continue;
        ContextCurve& c = e.curves[curve_of[d.key(t.result.config)]];
        const auto at = static_cast<std::size_t>(
            std::lower_bound(e.contexts.begin(), e.contexts.end(), t.result.config.context) - e.contexts.begin());
        c.best_tokens_per_s[at] = std::max(c.best_tokens_per_s[at].value_or(0.0), t.result.tokens_per_s);
        c.min_peak[at] = std::min(c.min_peak[at].value_or(UINT64_MAX), t.result.memory.peak);
    }
    return e;
}

}  // namespace tune
