#include "store/best.h"

#include <algorithm>
#include <functional>
#include <set>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "core/convergence_risk.h"
#include "core/noise_ties.h"
#include "core/pareto.h"
#include "core/units.h"
#include "store/store.h"

namespace tune {

std::uint64_t answer_peak(const TrialRecord& t, Basis b) {
    if (t.answered_for) return t.answered_for->device;
    return b == Basis::measured ? t.result.memory.peak : t.result.estimate->memory.peak;
}
double answer_tokens_per_s(const TrialRecord& t, Basis b) {
    if (b == Basis::measured) return t.result.tokens_per_s;
    return t.answered_for ? t.answered_for->tokens_per_s : t.result.estimate->tokens_per_s;
}

namespace {

// Offload's host bytes per node: the estimate's, or the measured host peak over as many ranks as
// the estimate put on one node (the trial's, when it has no estimate); 0 without offload.
std::uint64_t host_node_of(const TrialRecord& t, Basis b) {
    const std::optional<Estimate>& e = t.result.estimate;
    if (b == Basis::predicted) return e ? e->host_node_bytes : 0;
    const std::uint64_t rank_peak = t.result.host_memory.peak;
    if (e && e->host_memory.peak > 0) return rank_peak * (e->host_node_bytes / e->host_memory.peak);
    return rank_peak * t.result.config.world_size;
}

struct FrameworkScope {
    std::string framework = "tune";
    std::size_t cannot_run = 0, does_not_fit = 0, unpredicted = 0;
    std::string cannot_run_example;  // "trial 3: LOMO with fp16-mixed: ..."
};

// Keeps the trials the stack each is answered for can run and holds within the sweep's
// limit, each with that stack's prediction attached; counts the rest by cause. A trial
// recorded before predictions were kept stays, with our engine's numbers, and is counted.
FrameworkScope answer_for_framework(std::vector<TrialRecord>& trials, const BestQuery& q) {
    FrameworkScope scope;
    if (q.framework)
        scope.framework = *q.framework;
    else if (!trials.empty())
        scope.framework = trials.front().sweep_framework;
    std::erase_if(trials, [&](TrialRecord& t) {
        const std::string& f = q.framework ? *q.framework : t.sweep_framework;
        if (f == "tune") return false;
        const auto it = t.frameworks.find(f);
        if (it == t.frameworks.end()) return ++scope.unpredicted, false;
        if (!it->second.invalid.empty()) {
            if (scope.cannot_run_example.empty())
                scope.cannot_run_example = fmt::format("trial {}: {}", t.id, it->second.invalid);
            return ++scope.cannot_run, true;
        }
        if (!it->second.fits) return ++scope.does_not_fit, true;
        t.answered_for = it->second;
        return false;
    });
    return scope;
}

// "hf-trainer left out 3 configurations it cannot run and 2 predicted not to fit".
std::string framework_why(const FrameworkScope& s) {
    std::vector<std::string> parts;
    if (s.cannot_run) parts.push_back(fmt::format("{} it cannot run ({})", s.cannot_run, s.cannot_run_example));
    if (s.does_not_fit) parts.push_back(fmt::format("{} predicted not to fit in its device memory", s.does_not_fit));
    if (parts.empty()) return {};
    return fmt::format("answering for {}: left out {}", s.framework, fmt::join(parts, ", "));
}

// One constraint of the query: whether a trial meets it, and why none of a set does.
struct Constraint {
    std::function<bool(const TrialRecord&)> meets;
    std::function<std::string(const std::vector<const TrialRecord*>&)> why_none;
};

// At most `limit` bytes of one number of a trial; the smallest says why none qualifies:
// "none fits in 40.00 GiB<where>: the smallest <noun> is 52.10 GiB (config, trial 7)".
Constraint byte_limit(std::uint64_t limit, std::string where, std::string noun,
                      std::function<std::uint64_t(const TrialRecord&)> bytes) {
    return {[limit, bytes](const TrialRecord& t) { return bytes(t) <= limit; },
            [limit, where, noun, bytes](const std::vector<const TrialRecord*>& set) {
                auto smallest =
                    *std::min_element(set.begin(), set.end(), [&](auto* a, auto* c) { return bytes(*a) < bytes(*c); });
                return fmt::format("none fits in {}{}: the smallest {} is {} ({}, trial {})", format_bytes(limit),
                                   where, noun, format_bytes(bytes(*smallest)), summary(smallest->result.config),
                                   smallest->id);
            }};
}

std::vector<Constraint> constraints_of(const BestQuery& q, Basis b) {
    std::vector<Constraint> out;
    const std::string_view word = to_string(b);
    if (q.max_memory)
        out.push_back(byte_limit(*q.max_memory, "", fmt::format("{} peak", word),
                                 [b](const TrialRecord& t) { return answer_peak(t, b); }));
    if (q.max_host_memory)
        out.push_back(byte_limit(*q.max_host_memory, " of host memory per node", std::string(word),
                                 [b](const TrialRecord& t) { return host_node_of(t, b); }));
    if (q.min_context) {
        const std::uint32_t want = *q.min_context;
        out.push_back({[want](const TrialRecord& t) { return t.result.config.context >= want; },
                       [want, word](const std::vector<const TrialRecord*>& set) {
                           std::uint32_t longest = 0;
                           for (auto* t : set) longest = std::max(longest, t->result.config.context);
                           return fmt::format("none has context >= {}: the longest {} is {}", want, word, longest);
                       }});
    }
    if (q.gpus) {
        const std::uint32_t want = *q.gpus;
        out.push_back({[want](const TrialRecord& t) { return t.result.config.world_size == want; },
                       [want, word](const std::vector<const TrialRecord*>& set) {
                           std::set<std::uint32_t> sizes;
                           for (auto* t : set) sizes.insert(t->result.config.world_size);
                           return fmt::format("none is for {} GPUs: {} GPU counts are {}", want, word,
                                              fmt::join(sizes, ", "));
                       }});
    }
    for (const auto& [index, value] : q.equal) {
        const Dimension& d = dimensions()[index];
        out.push_back({[&d, value](const TrialRecord& t) { return d.get(t.result.config) == value; },
                       [&d, value, word](const std::vector<const TrialRecord*>& set) {
                           std::set<std::string> names;
                           for (auto* t : set) names.insert(d.text(t->result.config));
                           return fmt::format("none has {} {}: {} values are {}", d.name, d.format(value), word,
                                              fmt::join(names, ", "));
                       }});
    }
    return out;
}

std::vector<const TrialRecord*> meeting(const std::vector<TrialRecord>& all, const std::vector<Constraint>& cs,
                                        std::optional<std::size_t> except) {
    std::vector<const TrialRecord*> out;
    for (const auto& t : all) {
        bool ok = true;
        for (std::size_t i = 0; i < cs.size() && ok; ++i) ok = (except && *except == i) || cs[i].meets(t);
        if (ok) out.push_back(&t);
    }
    return out;
}

std::string status_counts_text(const StatusCounts& counts) {
    std::vector<std::string> parts;
    for (TrialStatus s : kStatuses)
        if (auto n = counts[static_cast<std::size_t>(s)]) parts.push_back(fmt::format("{} {}", n, to_string(s)));
    return parts.empty() ? "no trials at all" : fmt::format("{}", fmt::join(parts, ", "));
}

// Constraints that no ok trial meets even alone are the plain causes; otherwise each
// constraint is explained among the trials that meet all the others.
std::vector<std::string> explain(const std::vector<TrialRecord>& ok, const std::vector<Constraint>& cs,
                                 const StatusCounts& counts, Basis b) {
    const std::string_view kind = b == Basis::measured ? "ok trials" : "configurations predicted to fit";
    if (ok.empty())
        return {b == Basis::measured ? fmt::format("no trial has finished ok ({})", status_counts_text(counts))
                                     : std::string("no configuration that was not measured is predicted to fit")};
    std::vector<std::string> why;
    std::vector<const TrialRecord*> all;
    for (const auto& t : ok) all.push_back(&t);
    for (const auto& c : cs)
        if (std::none_of(all.begin(), all.end(), [&](auto* t) { return c.meets(*t); }))
            why.push_back(fmt::format("of the {} {}, {}", all.size(), kind, c.why_none(all)));
    if (!why.empty()) return why;
    for (std::size_t i = 0; i < cs.size(); ++i) {
        auto others = meeting(ok, cs, i);
        if (!others.empty())
            why.push_back(fmt::format("of the {} {} that meet the other constraints, {}", others.size(), kind,
                                      cs[i].why_none(others)));
    }
    if (why.empty())
        why.push_back(fmt::format("each constraint is met by one of the {}, but none meets them together", kind));
    return why;
}

bool ranks_before(const TrialRecord& a, const TrialRecord& b, BestBy by, Basis basis) {
    const double ra = answer_tokens_per_s(a, basis), rb = answer_tokens_per_s(b, basis);
    const std::uint64_t pa = answer_peak(a, basis), pb = answer_peak(b, basis);
    if (by == BestBy::tokens_per_s) {
        if (ra != rb) return ra > rb;
        if (pa != pb) return pa < pb;
    } else {
        if (pa != pb) return pa < pb;
        if (ra != rb) return ra > rb;
    }
    return a.id < b.id;
}

// The measured trials whose throughput is within noise of the best's (core/noise_ties.h),
// the best included; empty when none ties with it.
std::vector<TrialId> ties_with_best(const std::vector<TrialRecord>& ranked) {
    std::vector<NoisyRate> rates;
    for (const TrialRecord& t : ranked) rates.push_back(t.noisy_rate());
    const std::vector<std::size_t> tied = ties_with_first(rates);
    std::vector<TrialId> ids;
    if (tied.size() > 1)
        for (std::size_t i : tied) ids.push_back(ranked[i].id);
    return ids;
}

bool risky(const TrialRecord& t) { return convergence_risk(t.result.config).has_value(); }

// Configurations without a convergence risk first, each group in its order; when a risky one led,
// it becomes the alternative. Where every configuration is risky the best stays the best.
void risk_free_first(BestAnswer& answer) {
    auto& ranked = answer.ranked;
    if (!risky(ranked.front()) || std::all_of(ranked.begin(), ranked.end(), risky)) return;
    answer.risky_alternative = ranked.front();
    std::stable_partition(ranked.begin(), ranked.end(), [](const TrialRecord& t) { return !risky(t); });
}

// Leaves out of the ranked candidates (in rank order) what the query's emit target cannot write
// exactly, counting them and keeping the reason of the best.
void rank_out_inexpressible(BestAnswer& answer, const BestQuery& query) {
    if (!query.emit) return;
    std::erase_if(answer.ranked, [&](const TrialRecord& t) {
        const auto why = query.emit->inexpressible(t.result.config);
        if (!why) return false;
        if (answer.inexpressible++ == 0) answer.inexpressible_example = fmt::format("trial {}: {}", t.id, *why);
        return true;
    });
}

// Ranks the trials in scope (already reduced to the basis's candidates) under the query.
BestAnswer rank(std::vector<TrialRecord> scope, const BestQuery& query, const StatusCounts& counts, Basis basis) {
    const auto cs = constraints_of(query, basis);
    BestAnswer answer;
    answer.basis = basis;
    const std::size_t before = scope.size();
    const FrameworkScope fw = answer_for_framework(scope, query);
    answer.framework = fw.framework;
    answer.framework_cannot_run = fw.cannot_run;
    answer.framework_does_not_fit = fw.does_not_fit;
    answer.framework_unpredicted = fw.unpredicted;
    answer.measured_ok = scope.size();
    for (const TrialRecord* t : meeting(scope, cs, std::nullopt)) answer.ranked.push_back(*t);
    std::sort(answer.ranked.begin(), answer.ranked.end(),
              [&](const TrialRecord& a, const TrialRecord& b) { return ranks_before(a, b, query.by, basis); });
    // Only what meets every constraint is exported to ask the target, since an export costs; in rank
    // order, so the reason kept is that of the configuration that would have been the answer.
    const bool met = !answer.ranked.empty();
    rank_out_inexpressible(answer, query);
    answer.qualifying = answer.ranked.size();
    if (answer.ranked.empty()) {
        // When the stack left out every candidate, that is the whole answer; so when the target did.
        if (!met && (before == 0 || !scope.empty())) answer.why_none = explain(scope, cs, counts, basis);
        if (const std::string why = framework_why(fw); !why.empty()) answer.why_none.push_back(why);
        if (answer.inexpressible > 0)
            answer.why_none.push_back(
                fmt::format("--emit {} cannot write exactly any of the {} that qualify otherwise (the best: {})",
                            query.emit->name, answer.inexpressible, answer.inexpressible_example));
        return answer;
    }
    if (!query.allow_risk) risk_free_first(answer);
    std::vector<std::optional<ParetoPoint>> points;
    for (const TrialRecord& t : answer.ranked)
        points.push_back(t.answered_for ? std::optional(ParetoPoint{static_cast<double>(answer_peak(t, basis)),
                                                                    answer_tokens_per_s(t, basis)})
                         : basis == Basis::measured ? measured_point(t.result)
                                                    : predicted_point(t.result));
    answer.on_front.assign(answer.ranked.size(), false);
    for (std::size_t i : front_of(points)) answer.on_front[i] = true;
    if (basis == Basis::measured && query.by == BestBy::tokens_per_s)
        answer.tied_with_best = ties_with_best(answer.ranked);
    if (answer.ranked.size() > query.top) {
        answer.ranked.resize(std::max<std::size_t>(query.top, 1));
        answer.on_front.resize(answer.ranked.size());
    }
    return answer;
}

struct Scope {
    std::optional<SweepId> sweep;
    StatusCounts counts{};
};

Scope scope_of(const Store& store, const BestQuery& query) {
    Scope scope;
    if (!query.sweep) {
        for (const auto& s : store.sweeps())
            for (std::size_t i = 0; i < scope.counts.size(); ++i) scope.counts[i] += s.counts[i];
        return scope;
    }
    auto sweep = store.find_sweep(*query.sweep);
    if (!sweep) {
        std::vector<std::string> names;
        for (const auto& s : store.sweeps()) names.push_back(s.record.name);
        throw ConfigError(fmt::format("no sweep named '{}' in {} (sweeps: {})", *query.sweep, store.path(),
                                      names.empty() ? "none" : fmt::format("{}", fmt::join(names, ", "))));
    }
    scope.sweep = sweep->id;
    scope.counts = sweep->counts;
    return scope;
}

}  // namespace

std::string alternative_gain(const BestAnswer& a, BestBy by) {
    if (!a.risky_alternative || a.ranked.empty()) return {};
    const TrialRecord& best = a.ranked.front();
    const TrialRecord& alt = *a.risky_alternative;
    if (by == BestBy::tokens_per_s) {
        const double ratio = answer_tokens_per_s(alt, a.basis) / std::max(answer_tokens_per_s(best, a.basis), 1e-300);
        return fmt::format("{:+.0f}% tokens/s", (ratio - 1) * 100);
    }
    const double ratio = static_cast<double>(answer_peak(alt, a.basis)) /
                         std::max<double>(static_cast<double>(answer_peak(best, a.basis)), 1);
    return fmt::format("{:+.0f}% peak memory", (ratio - 1) * 100);
}

BestAnswer rank_best(std::vector<TrialRecord> ok_trials, const BestQuery& query, const StatusCounts& scope_counts) {
    std::erase_if(ok_trials, [](const TrialRecord& t) { return t.result.status != TrialStatus::ok || !t.measured; });
    return rank(std::move(ok_trials), query, scope_counts, Basis::measured);
}

BestAnswer rank_predicted(std::vector<TrialRecord> trials, const BestQuery& query) {
    // Only what the estimator speaks for (not measured) and says fits: a front never shows what does not fit.
    std::erase_if(trials, [](const TrialRecord& t) {
        const TrialStatus s = t.result.status;
        return t.measured || (s != TrialStatus::pending && s != TrialStatus::running) || !predicted_point(t.result);
    });
    return rank(std::move(trials), query, {}, Basis::predicted);
}

BestAnswer find_best(const Store& store, const BestQuery& query) {
    const Scope scope = scope_of(store, query);
    return rank_best(store.trials({scope.sweep, TrialStatus::ok, true, false}), query, scope.counts);
}

BestAnswer find_best_predicted(const Store& store, const BestQuery& query) {
    const Scope scope = scope_of(store, query);
    std::vector<TrialRecord> trials = store.trials({scope.sweep, TrialStatus::pending, true, false});
    for (auto& t : store.trials({scope.sweep, TrialStatus::running, true, false})) trials.push_back(std::move(t));
    return rank_predicted(std::move(trials), query);
}

}  // namespace tune
