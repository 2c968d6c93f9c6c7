#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <optional>
#include <random>

#include "core/pareto.h"

using namespace tune;

namespace {

// Brute force: a point is on the front when nothing dominates it.
std::vector<std::size_t> brute_front(const std::vector<ParetoPoint>& p, const std::vector<bool>& removed) {
    std::vector<std::size_t> out;
    for (std::size_t i = 0; i < p.size(); ++i) {
        if (removed[i]) continue;
        bool dominated = false;
        for (std::size_t j = 0; j < p.size() && !dominated; ++j) dominated = !removed[j] && dominates(p[j], p[i]);
        if (!dominated) out.push_back(i);
    }
    return out;
}

// Brute force ranks: peel fronts one at a time.
std::vector<std::uint32_t> brute_ranks(const std::vector<ParetoPoint>& p) {
    std::vector<std::uint32_t> rank(p.size(), 0);
    std::vector<bool> removed(p.size(), false);
    for (std::uint32_t k = 0; std::count(removed.begin(), removed.end(), false) > 0; ++k) {
        for (std::size_t i : brute_front(p, removed)) rank[i] = k, removed[i] = true;
    }
    return rank;
}

std::vector<ParetoPoint> random_points(std::mt19937_64& rng, std::size_t n, std::uint64_t spread) {
    // Small ranges make ties and exact duplicates common.
    std::uniform_int_distribution<std::uint64_t> memory(0, spread);
    std::uniform_int_distribution<int> speed(0, static_cast<int>(spread));
    std::vector<ParetoPoint> points(n);
    for (auto& p : points) p = {static_cast<double>(memory(rng)), static_cast<double>(speed(rng))};
    return points;
}

}  // namespace

TEST_CASE("the Pareto front equals brute force on random points", "[pareto]") {
    std::mt19937_64 rng(7);
    for (int trial = 0; trial < 500; ++trial) {
        const auto points = random_points(rng, 1 + trial % 60, trial % 2 ? 10 : 1000);
        std::vector<std::size_t> fast = pareto_front(points);
        std::vector<std::size_t> slow = brute_front(points, std::vector<bool>(points.size(), false));
        // The front comes by memory ascending.
        for (std::size_t i = 1; i < fast.size(); ++i) CHECK(points[fast[i - 1]].memory <= points[fast[i]].memory);
        std::sort(fast.begin(), fast.end());
        CHECK(fast == slow);
    }
}

TEST_CASE("Pareto ranks equal successive brute-force fronts", "[pareto]") {
    std::mt19937_64 rng(11);
    for (int trial = 0; trial < 500; ++trial) {
        const auto points = random_points(rng, 1 + trial % 80, trial % 2 ? 8 : 500);
        CHECK(pareto_ranks(points) == brute_ranks(points));
    }
}

TEST_CASE("Pareto front: hand cases with ties and duplicates", "[pareto]") {
    CHECK(pareto_front(std::vector<ParetoPoint>{}).empty());
    CHECK(pareto_ranks(std::vector<ParetoPoint>{}).empty());
    // (memory, tokens/s): 1 is dominated by 0 (same memory, slower); 3 duplicates 2; 4 is slower and bigger.
    const std::vector<ParetoPoint> p{{10, 100}, {10, 90}, {20, 200}, {20, 200}, {30, 150}, {40, 300}};
    CHECK(pareto_front(p) == std::vector<std::size_t>{0, 2, 3, 5});
    CHECK(pareto_ranks(p) == std::vector<std::uint32_t>{0, 1, 0, 0, 1, 0});
    CHECK(dominates(p[0], p[1]));
    CHECK_FALSE(dominates(p[2], p[3]));
}

TEST_CASE("fronts are drawn over what finished ok (measured) or fits (predicted), nothing else", "[pareto]") {
    auto result = [](TrialStatus status, std::uint64_t peak, double tps, std::optional<bool> fits) {
        TrialResult r;
        r.status = status;
        r.memory.peak = peak;
        r.tokens_per_s = tps;
        if (fits) {
            r.estimate = Estimate{};
            r.estimate->memory.peak = peak;
            r.estimate->tokens_per_s = tps;
            r.estimate->fits = *fits;
        }
        return r;
    };
    const std::vector<TrialResult> results{
        result(TrialStatus::ok, 10, 100, true),           // 0: on both fronts
        result(TrialStatus::oom, 5, 1000, false),         // 1: faster and smaller, but neither measured ok nor fitting
        result(TrialStatus::ok, 20, 150, true),           // 2: on both fronts
        result(TrialStatus::ok, 30, std::nan(""), true),  // 3: no throughput measured
        result(TrialStatus::pending, 25, 200, true),      // 4: predicted only
    };
    std::vector<std::optional<ParetoPoint>> measured, predicted;
    for (const auto& r : results) {
        measured.push_back(measured_point(r));
        predicted.push_back(predicted_point(r));
    }
    CHECK(front_of(measured) == std::vector<std::size_t>{0, 2});
    CHECK(front_of(predicted) == std::vector<std::size_t>{0, 2, 4});
}
