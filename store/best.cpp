#include "store/best.h"

#include <algorithm>
#include <functional>
#include <set>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "core/pareto.h"
#include "core/units.h"
#include "store/store.h"

namespace tune {
namespace {

// One constraint of the query: whether a trial meets it, and why none of a set does.
struct Constraint {
    std::function<bool(const TrialRecord&)> meets;
    std::function<std::string(const std::vector<const TrialRecord*>&)> why_none;
};

std::vector<Constraint> constraints_of(const BestQuery& q) {
    std::vector<Constraint> out;
    if (q.max_memory) {
        const std::uint64_t limit = *q.max_memory;
        out.push_back({[limit](const TrialRecord& t) { return t.result.memory.peak <= limit; },
                       [limit](const std::vector<const TrialRecord*>& set) {
                           auto smallest = *std::min_element(set.begin(), set.end(), [](auto* a, auto* b) {
                               return a->result.memory.peak < b->result.memory.peak;
                           });
                           return fmt::format("none fits in {}: the smallest measured peak is {} ({}, trial {})",
                                              format_bytes(limit), format_bytes(smallest->result.memory.peak),
                                              summary(smallest->result.config), smallest->id);
                       }});
    }
    if (q.min_context) {
        const std::uint32_t want = *q.min_context;
        out.push_back({[want](const TrialRecord& t) { return t.result.config.context >= want; },
                       [want](const std::vector<const TrialRecord*>& set) {
                           std::uint32_t longest = 0;
                           for (auto* t : set) longest = std::max(longest, t->result.config.context);
                           return fmt::format("none has context >= {}: the longest measured is {}", want, longest);
                       }});
    }
    if (q.gpus) {
        const std::uint32_t want = *q.gpus;
        out.push_back({[want](const TrialRecord& t) { return t.result.config.world_size == want; },
                       [want](const std::vector<const TrialRecord*>& set) {
                           std::set<std::uint32_t> sizes;
                           for (auto* t : set) sizes.insert(t->result.config.world_size);
                           return fmt::format("none ran on {} GPUs: measured GPU counts are {}", want,
                                              fmt::join(sizes, ", "));
                       }});
    }
    for (const auto& [index, value] : q.equal) {
        const Dimension& d = dimensions()[index];
        out.push_back({[&d, value](const TrialRecord& t) { return d.get(t.result.config) == value; },
                       [&d, value](const std::vector<const TrialRecord*>& set) {
                           std::set<std::string> names;
                           for (auto* t : set) names.insert(d.text(t->result.config));
                           return fmt::format("none has {} {}: measured values are {}", d.name, d.format(value),
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
                                 const StatusCounts& counts) {
    if (ok.empty()) return {fmt::format("no trial has finished ok ({})", status_counts_text(counts))};
    std::vector<std::string> why;
    std::vector<const TrialRecord*> all;
    for (const auto& t : ok) all.push_back(&t);
    for (const auto& c : cs)
        if (std::none_of(all.begin(), all.end(), [&](auto* t) { return c.meets(*t); }))
            why.push_back(fmt::format("of the {} ok trials, {}", all.size(), c.why_none(all)));
    if (!why.empty()) return why;
    for (std::size_t i = 0; i < cs.size(); ++i) {
        auto others = meeting(ok, cs, i);
        if (!others.empty())
            why.push_back(fmt::format("of the {} ok trials that meet the other constraints, {}", others.size(),
                                      cs[i].why_none(others)));
    }
    if (why.empty()) why.push_back("each constraint is met by some ok trial, but no trial meets them together");
    return why;
}

bool ranks_before(const TrialRecord& a, const TrialRecord& b, BestBy by) {
    const auto& ra = a.result;
    const auto& rb = b.result;
    if (by == BestBy::tokens_per_s) {
        if (ra.tokens_per_s != rb.tokens_per_s) return ra.tokens_per_s > rb.tokens_per_s;
        if (ra.memory.peak != rb.memory.peak) return ra.memory.peak < rb.memory.peak;
    } else {
        if (ra.memory.peak != rb.memory.peak) return ra.memory.peak < rb.memory.peak;
        if (ra.tokens_per_s != rb.tokens_per_s) return ra.tokens_per_s > rb.tokens_per_s;
    }
    return a.id < b.id;
}

}  // namespace

BestAnswer rank_best(std::vector<TrialRecord> ok_trials, const BestQuery& query, const StatusCounts& scope_counts) {
    std::erase_if(ok_trials, [](const TrialRecord& t) { return t.result.status != TrialStatus::ok || !t.measured; });
    const auto cs = constraints_of(query);
    BestAnswer answer;
    answer.measured_ok = ok_trials.size();
    for (const TrialRecord* t : meeting(ok_trials, cs, std::nullopt)) answer.ranked.push_back(*t);
    answer.qualifying = answer.ranked.size();
    if (answer.ranked.empty()) {
        answer.why_none = explain(ok_trials, cs, scope_counts);
        return answer;
    }
    std::sort(answer.ranked.begin(), answer.ranked.end(),
              [&](const TrialRecord& a, const TrialRecord& b) { return ranks_before(a, b, query.by); });
    std::vector<std::optional<ParetoPoint>> points;
    for (const TrialRecord& t : answer.ranked) points.push_back(measured_point(t.result));
    answer.on_front.assign(answer.ranked.size(), false);
    for (std::size_t i : front_of(points)) answer.on_front[i] = true;
    if (answer.ranked.size() > query.top) {
        answer.ranked.resize(std::max<std::size_t>(query.top, 1));
        answer.on_front.resize(answer.ranked.size());
    }
    return answer;
}

BestAnswer find_best(const Store& store, const BestQuery& query) {
    TrialQuery tq{std::nullopt, TrialStatus::ok, true, false};
    StatusCounts counts{};
    if (query.sweep) {
        auto sweep = store.find_sweep(*query.sweep);
        if (!sweep) {
            std::vector<std::string> names;
            for (const auto& s : store.sweeps()) names.push_back(s.record.name);
            throw ConfigError(fmt::format("no sweep named '{}' in {} (sweeps: {})", *query.sweep, store.path(),
                                          names.empty() ? "none" : fmt::format("{}", fmt::join(names, ", "))));
        }
        tq.sweep = sweep->id;
        counts = sweep->counts;
    } else {
        for (const auto& s : store.sweeps())
            for (std::size_t i = 0; i < counts.size(); ++i) counts[i] += s.counts[i];
    }
    return rank_best(store.trials(tq), query, counts);
}

}  // namespace tune
