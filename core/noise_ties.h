// When two measured configurations are "within each other's noise": the one
// rule `tune best` and the reports' Pareto fronts use to call two throughputs
// a tie rather than a ranking.
//
// A trial's step time is known to median ± k·stddev/√n (n timed steps; the
// standard error of the mean, widened to k of them). Throughput is tokens per
// step over step time, so its interval is the trial's tokens/s scaled by
// median/(median + k·se) .. median/(median − k·se). Two trials tie when their
// throughput intervals overlap. A trial with fewer than two timed steps has no
// spread: its interval is its one throughput.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

namespace tune {

// Standard errors on either side of the median: about 95% for a normal mean.
inline constexpr double kNoiseSigmas = 2.0;

// A measured throughput with the noise of the steps it came from.
struct NoisyRate {
    double tokens_per_s = 0;
    double median_step_s = 0;
    double stddev_step_s = 0;
    std::size_t timed_steps = 0;
    std::uint64_t peak_bytes = 0;  // for the front: which of two ties needs less memory
};

struct ThroughputInterval {
    double lo = 0;
    double hi = 0;
};

// nullopt when the rate is not finite and positive.
std::optional<ThroughputInterval> throughput_interval(const NoisyRate& r, double k = kNoiseSigmas);

// Both have intervals and they overlap.
bool within_noise(const NoisyRate& a, const NoisyRate& b, double k = kNoiseSigmas);

// The indices of `ranked` (best first by throughput) whose throughput ties with
// ranked[0]'s, 0 included; just {0} when nothing ties (empty for none).
std::vector<std::size_t> ties_with_first(std::span<const NoisyRate> ranked, double k = kNoiseSigmas);

// For each member of a front (memory ascending), the first member with a
// smaller peak whose throughput is within its noise: its extra memory buys no
// speed beyond the noise, so the two tie. nullopt: none.
std::vector<std::optional<std::size_t>> front_ties(std::span<const NoisyRate> front, double k = kNoiseSigmas);

}  // namespace tune
