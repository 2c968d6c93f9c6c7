#include "reports/comparison.h"

#include <algorithm>
#include <string>
#include <unordered_map>

#include "reports/report_format.h"

namespace tune {
namespace {

std::optional<double> median(std::vector<double> v) {
    if (v.empty()) return std::nullopt;
    const std::size_t mid = v.size() / 2;
    std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(mid), v.end());
    return v[mid];
}

bool both_ok(const TrialRecord& a, const TrialRecord& b) {
    return a.result.status == TrialStatus::ok && b.result.status == TrialStatus::ok && a.measured && b.measured;
}

}  // namespace

double delta_percent(double from, double to) { return from == 0 ? 0 : (to - from) / from * 100.0; }

Comparison compare_sweeps(const SweepData& baseline, const SweepData& other) {
    std::unordered_map<std::string, std::size_t> by_hash;
    std::unordered_map<std::string, std::size_t> by_dims;
    for (std::size_t i = 0; i < other.trials.size(); ++i) {
        by_hash.emplace(other.trials[i].config_hash, i);
        by_dims.emplace(dimensions_key(other.trials[i].result.config), i);
    }
    Comparison c;
    std::vector<bool> taken(other.trials.size(), false);
    std::vector<double> tokens;
    std::vector<double> peaks;
    for (std::size_t i = 0; i < baseline.trials.size(); ++i) {
        const TrialRecord& a = baseline.trials[i];
        std::optional<MatchedTrial> m;
        if (auto it = by_hash.find(a.config_hash); it != by_hash.end() && !taken[it->second])
            m = MatchedTrial{i, it->second, true};
        else if (auto jt = by_dims.find(dimensions_key(a.result.config)); jt != by_dims.end() && !taken[jt->second])
            m = MatchedTrial{i, jt->second, false};
        if (!m) continue;
        taken[m->other] = true;
        (m->by_hash ? c.by_hash : c.by_dimensions) += 1;
        c.matched.push_back(*m);
        const TrialRecord& b = other.trials[m->other];
        if (!both_ok(a, b)) continue;
        ++c.both_ok;
        tokens.push_back(delta_percent(a.result.tokens_per_s, b.result.tokens_per_s));
        peaks.push_back(
            delta_percent(static_cast<double>(a.result.memory.peak), static_cast<double>(b.result.memory.peak)));
    }
    c.tokens_delta_median_pct = median(std::move(tokens));
    c.peak_delta_median_pct = median(std::move(peaks));
    return c;
}

}  // namespace tune
