#include "core/noise_ties.h"

#include <cmath>

namespace tune {

std::optional<ThroughputInterval> throughput_interval(const NoisyRate& r, double k) {
    const double rate = r.tokens_per_s;
    if (!std::isfinite(rate) || rate <= 0) return std::nullopt;
    if (r.timed_steps < 2 || !(r.median_step_s > 0) || !std::isfinite(r.stddev_step_s))
        return ThroughputInterval{rate, rate};
    const double half = k * r.stddev_step_s / std::sqrt(static_cast<double>(r.timed_steps));
    const double slowest = r.median_step_s + half;
    const double fastest = r.median_step_s - half;
    // A spread as wide as the step itself bounds nothing from above.
    const double hi = fastest > 0 ? rate * r.median_step_s / fastest : INFINITY;
    return ThroughputInterval{rate * r.median_step_s / slowest, hi};
}

bool within_noise(const NoisyRate& a, const NoisyRate& b, double k) {
    const auto x = throughput_interval(a, k);
    const auto y = throughput_interval(b, k);
    return x && y && x->lo <= y->hi && y->lo <= x->hi;
}

std::vector<std::size_t> ties_with_first(std::span<const NoisyRate> ranked, double k) {
    std::vector<std::size_t> out;
    if (ranked.empty()) return out;
    out.push_back(0);
    for (std::size_t i = 1; i < ranked.size(); ++i)
        if (within_noise(ranked[0], ranked[i], k)) out.push_back(i);
    return out;
}

std::vector<std::optional<std::size_t>> front_ties(std::span<const NoisyRate> front, double k) {
    std::vector<std::optional<std::size_t>> tied(front.size());
    for (std::size_t i = 1; i < front.size(); ++i)
        for (std::size_t j = 0; j < i && !tied[i]; ++j)
            if (front[j].peak_bytes < front[i].peak_bytes && within_noise(front[i], front[j], k)) tied[i] = j;
    return tied;
}

}  // namespace tune
