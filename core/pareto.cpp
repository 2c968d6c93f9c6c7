#include "core/pareto.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace tune {
namespace {

// Indices by memory ascending, then throughput descending, then input order:
// every point comes after all the points that dominate it.
std::vector<std::size_t> sweep_order(std::span<const ParetoPoint> points) {
    std::vector<std::size_t> order(points.size());
    std::iota(order.begin(), order.end(), std::size_t{0});
    std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
        if (points[a].memory != points[b].memory) return points[a].memory < points[b].memory;
        return points[a].throughput > points[b].throughput;
    });
    return order;
}

bool same(const ParetoPoint& a, const ParetoPoint& b) { return a.memory == b.memory && a.throughput == b.throughput; }

}  // namespace

std::vector<std::size_t> pareto_front(std::span<const ParetoPoint> points) {
    std::vector<std::size_t> front;
    for (std::size_t i : sweep_order(points)) {
        // Earlier points use no more memory; i survives if none of them is at least as fast,
        // unless it is an exact copy of the last survivor.
        if (front.empty() || points[i].throughput > points[front.back()].throughput ||
            same(points[i], points[front.back()]))
            front.push_back(i);
    }
    return front;
}

std::vector<std::uint32_t> pareto_ranks(std::span<const ParetoPoint> points) {
    std::vector<std::uint32_t> rank(points.size(), 0);
    // best[k]: the highest throughput seen in front k so far; non-increasing in k.
    std::vector<double> best;
    const std::vector<std::size_t> order = sweep_order(points);
    for (std::size_t n = 0; n < order.size(); ++n) {
        const std::size_t i = order[n];
        if (n > 0 && same(points[i], points[order[n - 1]])) {
            rank[i] = rank[order[n - 1]];
            continue;
        }
        // The first front none of whose points is at least as fast as i (all of them use no more memory).
        const auto it =
            std::partition_point(best.begin(), best.end(), [&](double b) { return b >= points[i].throughput; });
        const auto k = static_cast<std::size_t>(it - best.begin());
        if (k == best.size())
            best.push_back(points[i].throughput);
        else
            best[k] = points[i].throughput;
        rank[i] = static_cast<std::uint32_t>(k);
    }
    return rank;
}

std::optional<ParetoPoint> measured_point(const TrialResult& r) {
    if (r.status != TrialStatus::ok || r.memory.peak == 0 || !std::isfinite(r.tokens_per_s)) return std::nullopt;
    return ParetoPoint{static_cast<double>(r.memory.peak), r.tokens_per_s};
}

std::optional<ParetoPoint> predicted_point(const TrialResult& r) {
    if (!r.estimate) return std::nullopt;
    return predicted_point(*r.estimate);
}

std::optional<ParetoPoint> predicted_point(const Estimate& e) {
    if (!e.fits || !std::isfinite(e.tokens_per_s)) return std::nullopt;
    return ParetoPoint{static_cast<double>(e.memory.peak), e.tokens_per_s};
}

std::optional<ParetoPoint> predicted_point(const FrameworkPrediction& p) {
    if (!p.invalid.empty() || !p.fits || !std::isfinite(p.tokens_per_s)) return std::nullopt;
    return ParetoPoint{static_cast<double>(p.device), p.tokens_per_s};
}

std::vector<std::size_t> front_of(std::span<const std::optional<ParetoPoint>> points) {
    std::vector<std::size_t> present;
    std::vector<ParetoPoint> dense;
    for (std::size_t i = 0; i < points.size(); ++i)
        if (points[i]) {
            present.push_back(i);
            dense.push_back(*points[i]);
        }
    std::vector<std::size_t> front;
    for (std::size_t k : pareto_front(dense)) front.push_back(present[k]);
    return front;
}

}  // namespace tune
