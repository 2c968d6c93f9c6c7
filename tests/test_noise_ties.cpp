// Step-time noise: Google Benchmark's statistics over the timed steps, the
// rule that gives a noisy trial more steps, "within noise" ties, and `tune best`'s.
#include <catch2/catch.hpp>

#include <cmath>
#include <vector>

#include "core/noise_rule.h"
#include "core/noise_ties.h"
#include "core/step_statistics.h"
#include "store/best.h"
#include "tests/support/timed_trial.h"

using namespace tune;

namespace {

NoisyRate timed(double tokens_per_s, double median_s, double stddev_s, std::size_t n, std::uint64_t peak = 100) {
    return {tokens_per_s, median_s, stddev_s, n, peak};
}

}  // namespace

TEST_CASE("step statistics are Google Benchmark's over the steps after warm-up", "[noise]") {
    // Warm-up 900 ms is left out; 100, 200, 300, 400 ms remain.
    const StepStatistics s = step_statistics({900, 100, 300, 200, 400}, 1);
    CHECK(s.count == 4);
    CHECK(s.mean_ms == Approx(250));
    CHECK(s.median_ms == Approx(250));
    CHECK(s.stddev_ms == Approx(std::sqrt(50000 / 3.0)));  // sample stddev: sum of squares 50000 ms^2, n - 1 = 3
    CHECK(s.cv == Approx(s.stddev_ms / 250));
    const StepStatistics odd = step_statistics({1, 10, 30, 20, NAN}, 1);  // NaN: an untimed step
    CHECK(odd.count == 3);
    CHECK(odd.median_ms == Approx(20));
    const StepStatistics one = step_statistics({5, 7}, 1);
    CHECK(one.stddev_ms == 0);
    CHECK(one.cv == 0);
    CHECK(step_statistics({5}, 1).count == 0);
}

TEST_CASE("a noisy trial runs more steps up to the cap, a quiet one does not", "[noise]") {
    const NoiseRule rule{0.05, 8};
    const std::vector<double> noisy{50, 100, 140, 100};  // CV of 100, 140, 100 is about 20%
    const std::vector<double> quiet{50, 100, 101, 100};
    CHECK(needs_more_steps(noisy, 1, rule));
    CHECK_FALSE(needs_more_steps(quiet, 1, rule));
    CHECK_FALSE(needs_more_steps({50, 100, 140, 100, 90, 130, 100, 140}, 1, rule));  // the cap: 8 steps in all
    CHECK_FALSE(needs_more_steps(noisy, 1, NoiseRule{0, 8}));                        // max_cv 0: off
}

TEST_CASE("throughput intervals come from median +/- k stddev / sqrt(n)", "[noise]") {
    // median 1 s, stddev 0.2 s over 4 steps: se 0.1 s, +/- 2 se = 0.8 .. 1.2 s.
    const auto i = throughput_interval(timed(1000, 1.0, 0.2, 4));
    REQUIRE(i);
    CHECK(i->lo == Approx(1000 / 1.2));
    CHECK(i->hi == Approx(1000 / 0.8));
    const auto point = throughput_interval(timed(1000, 1.0, 0.0, 1));
    REQUIRE(point);
    CHECK(point->lo == 1000);
    CHECK(point->hi == 1000);
    CHECK_FALSE(throughput_interval(timed(0, 1.0, 0.1, 4)));
    CHECK(std::isinf(throughput_interval(timed(1000, 1.0, 2.0, 4))->hi));  // a spread wider than the step
}

TEST_CASE("two throughputs tie when their intervals overlap", "[noise]") {
    const NoisyRate a = timed(1000, 1.0, 0.1, 4);    // 909 .. 1111
    const NoisyRate b = timed(1050, 0.952, 0.1, 4);  // overlaps a
    const NoisyRate c = timed(2000, 0.5, 0.01, 4);   // far above
    CHECK(within_noise(a, b));
    CHECK(within_noise(b, a));
    CHECK_FALSE(within_noise(a, c));
    // Without noise only equal throughputs tie.
    CHECK_FALSE(within_noise(timed(1000, 1.0, 0.0, 4), timed(1001, 1.0, 0.0, 4)));
    CHECK(within_noise(timed(1000, 1.0, 0.0, 4), timed(1000, 1.0, 0.0, 4)));
    // More steps shrink the interval: the same spread over 100 steps separates them.
    CHECK_FALSE(within_noise(timed(1000, 1.0, 0.1, 100), timed(1100, 0.909, 0.1, 100)));
}

TEST_CASE("ties with the best and on the front", "[noise]") {
    const NoisyRate best = timed(1000, 1.0, 0.1, 4, 300);
    const NoisyRate close = timed(980, 1.02, 0.1, 4, 200);
    const NoisyRate slow = timed(500, 2.0, 0.01, 4, 100);
    const std::vector<NoisyRate> ranked{best, close, slow};
    CHECK(ties_with_first(ranked) == std::vector<std::size_t>{0, 1});
    const std::vector<NoisyRate> alone{slow};
    CHECK(ties_with_first(alone) == std::vector<std::size_t>{0});
    // Front by memory: slow (100), close (200), best (300): best buys nothing over close.
    const std::vector<NoisyRate> front{slow, close, best};
    const auto ties = front_ties(front);
    REQUIRE(ties.size() == 3);
    CHECK_FALSE(ties[0]);
    CHECK_FALSE(ties[1]);
    REQUIRE(ties[2]);
    CHECK(*ties[2] == 1);
}

namespace {

TrialRecord measured(TrialId id, double tokens_per_s, double median_s, double stddev_s, std::uint64_t peak) {
    return test::timed_trial(id, tokens_per_s, median_s, stddev_s, peak, 4);
}

}  // namespace

TEST_CASE("tune best names the configurations within noise of the best", "[noise][best]") {
    BestQuery q;
    const std::vector<TrialRecord> trials{measured(1, 1000, 1.0, 0.1, 300), measured(2, 980, 1.02, 0.1, 200),
                                          measured(3, 500, 2.0, 0.01, 100)};
    const BestAnswer a = rank_best(trials, q, {});
    REQUIRE(a.ranked.size() == 3);
    CHECK(a.ranked[0].id == 1);
    CHECK(a.tied_with_best == std::vector<TrialId>{1, 2});
    // Quiet steps separate the same throughputs: no tie.
    const BestAnswer quiet = rank_best({measured(1, 1000, 1.0, 0.001, 300), measured(2, 980, 1.02, 0.001, 200)}, q, {});
    CHECK(quiet.tied_with_best.empty());
    // Ranked by memory, noise in throughput decides nothing.
    q.by = BestBy::peak_memory;
    CHECK(rank_best(trials, q, {}).tied_with_best.empty());
}
