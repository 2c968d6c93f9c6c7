#include "driver/makespan.h"

#include <algorithm>
#include <functional>
#include <queue>

#include "driver/plan.h"
#include "driver/slots.h"
#include "driver/trial_cost.h"
#include "launch/allocation.h"
#include "sweep/space.h"

namespace tune {
double predicted_trial_s(const Estimate& e, const SweepSpec& spec) { return TrialCost(spec).trial_s(e); }

MakespanPrediction predict_makespan(std::span<const NewTrial> plan, const SweepSpec& spec, std::uint32_t slots,
                                    std::uint32_t nodes) {
    return predict_makespan(plan, TrialCost(spec), slots, nodes);
}

MakespanPrediction predict_makespan(std::span<const NewTrial> plan, const TrialCost& cost, std::uint32_t slots,
                                    std::uint32_t nodes) {
    std::vector<const NewTrial*> order;
    for (const NewTrial& t : plan)
        if (t.status == TrialStatus::pending) order.push_back(&t);
    std::stable_sort(order.begin(), order.end(),
                     [](const NewTrial* a, const NewTrial* b) { return a->priority < b->priority; });
    MakespanPrediction p;
    p.slots = std::max(1u, slots);
    p.nodes = nodes;
    p.trials = order.size();
    // The times at which each slot frees; the next trial in order takes the earliest.
    std::priority_queue<double, std::vector<double>, std::greater<>> free_at;
    for (std::uint32_t i = 0; i < p.slots; ++i) free_at.push(0.0);
    for (const NewTrial* t : order) {
        const double d = cost.trial_s(t->estimate ? *t->estimate : Estimate{});
        const double start = free_at.top();
        free_at.pop();
        free_at.push(start + d);
        p.serial_s += d;
        p.makespan_s = std::max(p.makespan_s, start + d);
    }
    return p;
}

void record_makespan_prediction(Store& store, SweepId sweep, const std::string& name, std::span<const NewTrial> plan,
                                const SweepSpec& spec, const SlotLayout& layout) {
    const auto summary = store.find_sweep(name);
    nlohmann::json kept = summary ? summary->record.plan : nlohmann::json::object();
    kept["makespan"] =
        to_json(predict_makespan(plan, spec, static_cast<std::uint32_t>(layout.slots.size()), layout.nodes));
    store.set_plan(sweep, kept);
}

MakespanPrediction plan_makespan(SweepSpec spec, std::size_t visible_gpus, std::optional<std::uint32_t> nodes) {
    Allocation a = detect_allocation(visible_gpus);
    if (nodes) {
        // Packing onto N nodes is what the allocation of `tune submit --nodes N` would do.
        spec.resources.declared = true;
        spec.resources.nodes = *nodes;
        a.in_slurm = true;
        a.nodes = *nodes;
    }
    if (a.gpus.empty() && spec.hardware.backend == BackendKind::cuda)
        for (std::uint32_t i = 0; i < spec.gpus; ++i) a.gpus.push_back(std::to_string(i));
    const SlotLayout layout = slot_layout(spec, a);
    const PlanSettings settings{base_estimate_options(spec), 0.02, spec.strategy};
    const std::vector<NewTrial> plan = plan_trials(spec, expand_space(spec), settings);
    return predict_makespan(plan, spec, static_cast<std::uint32_t>(layout.slots.size()), layout.nodes);
}

nlohmann::json to_json(const MakespanPrediction& p) {
    return {{"predicted_s", p.makespan_s},
            {"serial_s", p.serial_s},
            {"slots", p.slots},
            {"nodes", p.nodes},
            {"trials", p.trials}};
}

}  // namespace tune
