#include "reports/what_to_run.h"

#include <algorithm>
#include <set>
#include <unordered_map>

#include <fmt/format.h>

#include "core/dimensions.h"
#include "core/pareto.h"
#include "core/units.h"
#include "reports/report_format.h"

namespace tune {
namespace {

// The peak a configuration needs by what is known of it: measured when it ran
// ok, else predicted when the estimator says it fits; nullopt otherwise.
std::optional<std::uint64_t> known_peak(const TrialRecord& t) {
    if (measured_point(t.result) && t.measured) return t.result.memory.peak;
    const TrialStatus s = t.result.status;
    if (!t.measured && (s == TrialStatus::pending || s == TrialStatus::running) && predicted_point(t.result))
        return t.result.estimate->memory.peak;
    return std::nullopt;
}

// The trials at one context, without what the ranking never reads (stderr tails).
std::vector<TrialRecord> at_context(const SweepData& sweep, std::uint32_t context) {
    std::vector<TrialRecord> out;
    for (const TrialRecord& t : sweep.trials) {
        if (t.result.config.context != context || !known_peak(t)) continue;
        out.push_back(t);
        out.back().stderr_tail.clear();
    }
    return out;
}

}  // namespace

std::vector<std::uint64_t> what_to_run_budgets(const SweepData& sweep) {
    std::optional<std::uint64_t> smallest;
    for (const TrialRecord& t : sweep.trials)
        if (const auto p = known_peak(t)) smallest = std::min(smallest.value_or(*p), *p);
    std::vector<std::uint64_t> out;
    for (std::uint64_t gib : kCommonBudgetsGiB) {
        const std::uint64_t b = gib * GiB;
        if (b < sweep.memory_limit && smallest && *smallest <= b) out.push_back(b);
    }
    if (sweep.memory_limit != 0) out.push_back(sweep.memory_limit);
    return out;
}

std::vector<Optimizer> sweep_optimizers(const SweepData& sweep) {
    std::set<Optimizer> used;
    for (const TrialRecord& t : sweep.trials) used.insert(t.result.config.optimizer);
    return {used.begin(), used.end()};
}

std::vector<WhatToRunRow> what_to_run(const SweepData& sweep, const WhatToRunChoice& choice) {
    std::set<std::uint32_t> contexts;
    for (const TrialRecord& t : sweep.trials)
        if (known_peak(t)) contexts.insert(t.result.config.context);
    std::unordered_map<TrialId, std::size_t> index;
    for (std::size_t i = 0; i < sweep.trials.size(); ++i) index.emplace(sweep.trials[i].id, i);

    const std::vector<std::uint64_t> budgets = what_to_run_budgets(sweep);
    const auto optimizer_dimension = static_cast<std::size_t>(find_dimension("optimizer") - dimensions().data());
    std::vector<WhatToRunRow> rows;
    for (std::uint64_t b : budgets)
        for (std::uint32_t c : contexts)
            rows.push_back({b, b == sweep.memory_limit, c, std::nullopt, Basis::measured, {}, {}, std::nullopt});
    for (std::uint32_t c : contexts) {
        const std::vector<TrialRecord> trials = at_context(sweep, c);
        for (WhatToRunRow& row : rows) {
            if (row.context != c) continue;
            BestQuery q;
            // What ran ok ran under the sweep's limit, and a prediction that fits fits it: the limit needs no
            // comparison (on the CPU backend it excludes the process's baseline, which the peak includes).
            if (!row.budget_is_limit) q.max_memory = row.budget;
            q.top = 1;
            q.allow_risk = choice.allow_risk;
            if (choice.optimizer) q.equal.emplace_back(optimizer_dimension, static_cast<DimValue>(*choice.optimizer));
            BestAnswer a = rank_best(trials, q, sweep.summary.counts);
            if (a.ranked.empty()) a = rank_predicted(trials, q);
            if (a.ranked.empty()) continue;
            row.trial = index.at(a.ranked.front().id);
            row.basis = a.basis;
            row.framework = a.ranked.front().answered_for;
            if (a.risky_alternative) {
                row.alternative = index.at(a.risky_alternative->id);
                row.alternative_gain = alternative_gain(a, q.by);
            }
        }
    }
    return rows;
}

std::uint64_t answer_peak(const SweepData& sweep, const WhatToRunRow& row) {
    if (row.framework) return row.framework->device;
    const TrialResult& r = sweep.trials.at(*row.trial).result;
    return row.basis == Basis::measured ? r.memory.peak : r.estimate->memory.peak;
}

double answer_tokens_per_s(const SweepData& sweep, const WhatToRunRow& row) {
    if (row.framework && row.basis == Basis::predicted) return row.framework->tokens_per_s;
    const TrialResult& r = sweep.trials.at(*row.trial).result;
    return row.basis == Basis::measured ? r.tokens_per_s : r.estimate->tokens_per_s;
}

std::string alternative_text(const SweepData& sweep, const WhatToRunRow& row) {
    if (!row.alternative) return {};
    const TrialRecord& t = sweep.trials.at(*row.alternative);
    return fmt::format("trial {} ({}): {}", t.id, summary(t.result.config), row.alternative_gain);
}

std::string budget_text(const WhatToRunRow& row) {
    return bytes_text(row.budget) + (row.budget_is_limit ? " (the sweep's memory limit)" : "");
}

}  // namespace tune
