#include "search/probed_rates.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace tune {

std::optional<double> ProbedRates::gemm_flops_per_s(std::int64_t m, std::int64_t n, std::int64_t k,
                                                    std::uint32_t dtype_bytes) const {
    const double want = std::log(2.0 * static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k));
    const GemmRate* best = nullptr;
    double distance = std::numeric_limits<double>::infinity();
    for (const GemmRate& g : gemm) {
        if (g.dtype_bytes != dtype_bytes || g.flops_per_s <= 0) continue;
        if (g.m == m && g.n == n && g.k == k) return g.flops_per_s;
        const double d = std::fabs(std::log(2.0 * static_cast<double>(g.m) * g.n * g.k) - want);
        if (d < distance) distance = d, best = &g;
    }
    if (best == nullptr) return std::nullopt;
    return best->flops_per_s;
}

std::optional<AttentionRate> ProbedRates::attention_at(std::int64_t batch, std::int64_t seq, std::int64_t heads,
                                                       std::int64_t head_dim, std::uint32_t dtype_bytes,
                                                       bool fused) const {
    // Work grows as batch * heads * seq^2 * head_dim: scale the nearest probe by it.
    const auto work = [](double b, double s, double h, double d) { return b * h * s * s * d; };
    const double want = work(static_cast<double>(batch), static_cast<double>(seq), static_cast<double>(heads),
                             static_cast<double>(head_dim));
    const AttentionRate* best = nullptr;
    double distance = std::numeric_limits<double>::infinity();
    for (const AttentionRate& a : attention) {
        if (a.dtype_bytes != dtype_bytes || a.fused != fused) continue;
        const double have = work(static_cast<double>(a.batch), static_cast<double>(a.seq),
                                 static_cast<double>(a.heads), static_cast<double>(a.head_dim));
        const double d = std::fabs(std::log(have / want));
        if (d < distance) distance = d, best = &a;
    }
    if (best == nullptr || want <= 0) return std::nullopt;
    AttentionRate out = *best;
    const double scale = want / work(static_cast<double>(best->batch), static_cast<double>(best->seq),
                                     static_cast<double>(best->heads), static_cast<double>(best->head_dim));
    out.batch = batch, out.seq = seq, out.heads = heads, out.head_dim = head_dim;
    out.forward_s *= scale;
    out.backward_s *= scale;
    return out;
}

}  // namespace tune

namespace tune {

double bus_factor(Collective op, std::uint32_t ranks) {
    if (ranks < 2) return 0;
    const double n = ranks;
    return op == Collective::all_reduce ? 2 * (n - 1) / n : (n - 1) / n;
}

double bus_bandwidth(Collective op, std::uint32_t ranks, double bytes, double seconds) {
    if (!(seconds > 0)) return 0;
    return bytes / seconds * bus_factor(op, ranks);
}

std::optional<double> ProbedRates::bus_bytes_per_s(Collective op, std::uint32_t ranks, double bytes) const {
    const CollectiveRate* best = nullptr;
    double distance = std::numeric_limits<double>::infinity();
    for (const CollectiveRate& r : collectives) {
        if (r.op != op || r.ranks != ranks || r.bus_bytes_per_s <= 0 || r.bytes == 0) continue;
        const double d = std::fabs(std::log(static_cast<double>(r.bytes) / std::max(bytes, 1.0)));
        if (d < distance) distance = d, best = &r;
    }
    if (best == nullptr) return std::nullopt;
    return best->bus_bytes_per_s;
}

}  // namespace tune
