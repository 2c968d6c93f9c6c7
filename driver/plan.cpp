#include "driver/plan.h"

#include <algorithm>
#include <cstdlib>
#include <thread>

#include <fmt/format.h>

#include "core/environment.h"
#include "core/machine_speed.h"
#include "core/pareto.h"
#include "core/units.h"
#include "driver/calibration.h"
#include "driver/slots.h"
#include "estimate/estimate.h"
#include "estimate/frameworks/framework_profile.h"

namespace tune {

std::uint32_t cpu_threads_per_rank(const SweepSpec& spec) {
    if (const auto threads = environment_integer("OMP_NUM_THREADS", 1, 1 << 16))
        return static_cast<std::uint32_t>(*threads);
    // The cores of the trial's slot (all of them when trials run one at a time).
    return slot_layout(spec, detect_allocation(0)).threads_per_rank;
}

EstimateOptions base_estimate_options(const SweepSpec& spec) {
    EstimateOptions o;
    if (spec.hardware.backend == BackendKind::cpu) o.cpu_threads = cpu_threads_per_rank(spec);
    o.memory_limit = spec.memory_limit();
    o.margin = spec.margin;
    o.host_memory = spec.host_memory;
    o.host_margin = spec.host_margin;
    o.ranks_per_node = spec.resources.gpus_per_node.value_or(spec.gpus);
    o.probed = spec.probed;
    o.pace_exponent = prior_pace_exponent(spec.hardware.backend);
    o.libraries = spec.libraries;
    o.lora_dropout = spec.lora_dropout;
    o.base_dtype = spec.base_dtype;
    // A device baseline the probes measured holds no pool slack; the preset's overhead is a round figure.
    if (spec.probed && spec.probed->device_baseline_bytes)
        o.overhead_per_activation_byte = prior_overhead_slope(spec.hardware.backend);
    return o;
}

std::string prune_reason(const Estimate& e, const FrameworkPredictions& frameworks, const SweepSpec& spec,
                         double tolerance) {
    const double usable = static_cast<double>(spec.usable_memory());
    const std::string limit =
        fmt::format("the usable {} ({} limit less {:.0f}% margin)", format_bytes(spec.usable_memory()),
                    format_bytes(spec.memory_limit()), spec.margin * 100);
    // The user trains in the sweep's framework: what it would hold decides first.
    if (spec.framework != FrameworkProfile::tune)
        if (auto it = frameworks.find(to_string(spec.framework)); it != frameworks.end() && it->second.invalid.empty())
            if (static_cast<double>(it->second.device) > usable * (1.0 + tolerance))
                return fmt::format("{} is predicted to use {} of device memory, more than {}",
                                   to_string(spec.framework), format_bytes(it->second.device), limit);
    if (static_cast<double>(limited_bytes(e.memory, spec.hardware)) > usable * (1.0 + tolerance))
        return fmt::format("predicted peak {} exceeds {} by more than the estimator's known error ({:.1f}%)",
                           format_bytes(limited_bytes(e.memory, spec.hardware)), limit, tolerance * 100);
    // Offload's host ledger against the node's host memory ([hardware] host_memory).
    if (const auto host = usable_host_bytes(spec.host_memory, spec.host_margin); host && e.host_node_bytes > 0) {
        if (static_cast<double>(e.host_node_bytes) > static_cast<double>(*host) * (1.0 + tolerance))
            return fmt::format(
                "host memory: offload keeps {} per node, more than the usable {} ([hardware] "
                "host_memory {} less {:.0f}% margin)",
                format_bytes(e.host_node_bytes), format_bytes(*host), format_bytes(*spec.host_memory),
                spec.host_margin * 100);
    }
    return {};
}

std::vector<double> priorities(std::span<const Estimate* const> estimates, SearchStrategy strategy) {
    std::vector<double> out(estimates.size());
    if (strategy == SearchStrategy::grid) {
        for (std::size_t i = 0; i < out.size(); ++i) out[i] = static_cast<double>(i);
        return out;
    }
    std::vector<ParetoPoint> points;
    points.reserve(estimates.size());
    double slowest = 0;
    for (const Estimate* e : estimates) {
        points.push_back({static_cast<double>(e->memory.peak), e->tokens_per_s});
        slowest = std::max(slowest, e->step_s);
    }
    const std::vector<std::uint32_t> ranks = pareto_ranks(points);
    // Within a front, the cheapest trial to run first: the front is measured sooner.
    for (std::size_t i = 0; i < out.size(); ++i)
        out[i] = ranks[i] + (slowest > 0 ? 0.999 * estimates[i]->step_s / slowest : 0.0);
    return out;
}

namespace {

// One runnable configuration judged: its estimate, every stack's prediction, and why it is pruned (empty: it runs).
struct Judgement {
    Estimate estimate;
    FrameworkPredictions frameworks;
    std::string reason;
    TrialStatus status = TrialStatus::pending;
};

Judgement judge(const SweepSpec& spec, const TrialConfig& c, const PlanSettings& settings) {
    Judgement j;
    j.estimate = estimate(spec.model, c, spec.hardware, settings.estimate);
    // Calibration's overhead and speed reach every stack's prediction through the same options.
    j.frameworks = framework_predictions(c, spec.hardware, settings.estimate, spec.usable_memory(), j.estimate);
    j.reason = prune_reason(j.estimate, j.frameworks, spec, settings.prune_tolerance);
    j.status = j.reason.empty() ? TrialStatus::pending : TrialStatus::pruned;
    return j;
}

// The pending items' priorities from their estimates (`estimate_of`); the rest keep theirs.
template <class Item, class EstimateOf>
void order_pending(std::vector<Item>& items, SearchStrategy strategy, EstimateOf estimate_of) {
    std::vector<const Estimate*> runnable;
    std::vector<std::size_t> index;
    for (std::size_t i = 0; i < items.size(); ++i)
        if (items[i].status == TrialStatus::pending) {
            runnable.push_back(&estimate_of(items[i]));
            index.push_back(i);
        }
    const std::vector<double> p = priorities(runnable, strategy);
    for (std::size_t k = 0; k < index.size(); ++k) items[index[k]].priority = p[k];
}

}  // namespace

std::vector<NewTrial> plan_trials(const SweepSpec& spec, const std::vector<Candidate>& candidates,
                                  const PlanSettings& settings) {
    std::vector<NewTrial> trials;
    trials.reserve(candidates.size());
    for (const Candidate& c : candidates) {
        NewTrial t;
        t.config = c.config;
        if (!c.valid()) {
            t.status = TrialStatus::invalid;
            t.reason = c.invalid_reason;
        } else {
            Judgement j = judge(spec, c.config, settings);
            t.estimate = std::move(j.estimate);
            t.frameworks = std::move(j.frameworks);
            t.reason = std::move(j.reason);
            t.status = j.status;
        }
        trials.push_back(std::move(t));
    }
    order_pending(trials, settings.strategy, [](const NewTrial& t) -> const Estimate& { return *t.estimate; });
    return trials;
}

std::vector<PendingUpdate> replan_pending(const SweepSpec& spec, const std::vector<TrialRecord>& pending,
                                          const PlanSettings& settings) {
    std::vector<PendingUpdate> updates;
    updates.reserve(pending.size());
    for (const TrialRecord& record : pending) {
        Judgement j = judge(spec, record.result.config, settings);
        PendingUpdate u;
        u.id = record.id;
        u.estimate = std::move(j.estimate);
        u.frameworks = std::move(j.frameworks);
        u.reason = std::move(j.reason);
        u.status = j.status;
        // In grid order the stored priority is the enumeration index: kept.
        if (settings.strategy == SearchStrategy::grid) u.priority = record.priority;
        updates.push_back(std::move(u));
    }
    if (settings.strategy != SearchStrategy::grid)
        order_pending(updates, settings.strategy, [](const PendingUpdate& u) -> const Estimate& { return u.estimate; });
    return updates;
}

}  // namespace tune
