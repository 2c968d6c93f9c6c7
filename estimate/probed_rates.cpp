#include "estimate/probed_rates.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>
#include <vector>

namespace tune {

namespace {

// The rate nearest `want` in log distance of its size (size_of), among those
// `usable` lets serve; a size that is not positive never serves. nullptr: none.
template <class Rate, class SizeOf, class Usable>
const Rate* nearest_size(const std::vector<Rate>& rates, double want, SizeOf size_of, Usable usable) {
    if (!(want > 0)) return nullptr;
    const Rate* best = nullptr;
    double distance = std::numeric_limits<double>::infinity();
    for (const Rate& r : rates) {
        const double have = size_of(r);
        if (!(have > 0) || !usable(r)) continue;
        const double d = std::fabs(std::log(have / want));
        if (d < distance) distance = d, best = &r;
    }
    return best;
}

}  // namespace

ProbeDtype probe_dtype(Precision p) {
    if (p == Precision::fp32) return ProbeDtype::f32;
    return p == Precision::fp16_mixed ? ProbeDtype::f16 : ProbeDtype::bf16;
}

std::uint32_t probe_dtype_bytes(ProbeDtype d) { return d == ProbeDtype::f32 ? 4 : 2; }

const char* probe_dtype_name(ProbeDtype d) {
    switch (d) {
        case ProbeDtype::f32:
            return "f32";
        case ProbeDtype::bf16:
            return "bf16";
        case ProbeDtype::f16:
            return "f16";
    }
    return "f32";
}

std::optional<ProbeDtype> parse_probe_dtype(const std::string& name) {
    for (ProbeDtype d : {ProbeDtype::f32, ProbeDtype::bf16, ProbeDtype::f16})
        if (name == probe_dtype_name(d)) return d;
    return std::nullopt;
}

std::optional<double> ProbedRates::gemm_flops_per_s(std::int64_t m, std::int64_t n, std::int64_t k, ProbeDtype dtype,
                                                    GemmPass pass, GemmOutput output) const {
    const double want = std::log(2.0 * static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k));
    // The exact shape among `usable` rates, else the nearest in FLOPs.
    const auto nearest = [&](const auto& usable) -> std::optional<double> {
        const GemmRate* best = nullptr;
        double distance = std::numeric_limits<double>::infinity();
        for (const GemmRate& g : gemm) {
            if (g.dtype != dtype || g.flops_per_s <= 0 || !usable(g)) continue;
            if (g.m == m && g.n == n && g.k == k) return g.flops_per_s;
            const double d = std::fabs(std::log(2.0 * static_cast<double>(g.m) * g.n * g.k) - want);
            if (d < distance) distance = d, best = &g;
        }
        if (best == nullptr) return std::nullopt;
        return best->flops_per_s;
    };
    if (auto r = nearest([&](const GemmRate& g) { return g.pass == pass && g.output == output; })) return r;
    if (auto r = nearest([&](const GemmRate& g) { return g.pass == pass; })) return r;
    return nearest([](const GemmRate& g) { return g.pass == GemmPass::forward; });
}

std::optional<AttentionRate> ProbedRates::attention_at(std::int64_t batch, std::int64_t seq, std::int64_t heads,
                                                       std::int64_t head_dim, ProbeDtype dtype, bool fused) const {
    // Work grows as batch * heads * seq^2 * head_dim: scale the nearest probe by it.
    const auto work = [](double b, double s, double h, double d) { return b * h * s * s * d; };
    const double want = work(static_cast<double>(batch), static_cast<double>(seq), static_cast<double>(heads),
                             static_cast<double>(head_dim));
    const AttentionRate* best = nearest_size(
        attention, want,
        [&](const AttentionRate& a) {
            return work(static_cast<double>(a.batch), static_cast<double>(a.seq), static_cast<double>(a.heads),
                        static_cast<double>(a.head_dim));
        },
        [&](const AttentionRate& a) { return a.dtype == dtype && a.fused == fused; });
    if (best == nullptr) return std::nullopt;
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
    const CollectiveRate* best = nearest_size(
        collectives, std::max(bytes, 1.0), [](const CollectiveRate& r) { return static_cast<double>(r.bytes); },
        [&](const CollectiveRate& r) { return r.op == op && r.ranks == ranks && r.bus_bytes_per_s > 0; });
    if (best == nullptr) return std::nullopt;
    return best->bus_bytes_per_s;
}

std::optional<double> ProbedRates::collective_seconds(Collective op, std::uint32_t ranks, double bytes,
                                                      ProbeDtype dtype) const {
    std::vector<std::pair<double, double>> points;  // (bytes, seconds per call), bytes ascending
    const auto collect = [&](ProbeDtype d) {
        for (const CollectiveRate& r : collectives)
            if (r.op == op && r.ranks == ranks && r.dtype == d && r.bus_bytes_per_s > 0 && r.bytes > 0) {
                const double b = static_cast<double>(r.bytes);
                points.emplace_back(b, b * bus_factor(op, ranks) / r.bus_bytes_per_s);
            }
    };
    collect(dtype);
    if (points.empty() && dtype != ProbeDtype::f32) collect(ProbeDtype::f32);
    if (points.empty()) return std::nullopt;
    std::sort(points.begin(), points.end());
    if (points.size() == 1) return points[0].second * bytes / points[0].first;
    if (bytes <= points.front().first) return points.front().second;
    std::size_t hi = 1;
    while (hi + 1 < points.size() && points[hi].first < bytes) ++hi;
    const auto [b0, t0] = points[hi - 1];
    const auto [b1, t1] = points[hi];
    const double slope = std::max(0.0, (t1 - t0) / (b1 - b0));
    return std::max(t0, t0 + slope * (bytes - b0));
}

std::optional<ElementwiseRate> ProbedRates::elementwise_at(std::int64_t tokens, ProbeDtype dtype) const {
    const ElementwiseRate* best = nearest_size(
        elementwise, static_cast<double>(tokens),
        [](const ElementwiseRate& e) { return static_cast<double>(e.tokens); },
        [&](const ElementwiseRate& e) { return e.dtype == dtype; });
    if (best == nullptr) return std::nullopt;
    ElementwiseRate out = *best;
    const double scale = static_cast<double>(tokens) / static_cast<double>(best->tokens);
    out.tokens = tokens;
    out.layer_forward_s *= scale;
    out.layer_backward_s *= scale;
    out.outer_s *= scale;
    return out;
}

std::optional<double> ProbedRates::dequantize_layer_seconds(const ModelSpec& m, ProbeDtype dtype) const {
    for (const DequantizeRate& d : dequantize)
        if (d.dtype == dtype && d.hidden == static_cast<std::int64_t>(m.hidden) &&
            d.kv_dim == static_cast<std::int64_t>(m.kv_dim()) && d.ffn == static_cast<std::int64_t>(m.ffn) &&
            d.layer_s > 0)
            return d.layer_s;
    return std::nullopt;
}

std::optional<double> ProbedRates::bucket_seconds(std::uint32_t ranks, double bytes, ProbeDtype dtype,
                                                  bool host) const {
    const BucketRate* best = nearest_size(
        buckets, bytes, [](const BucketRate& b) { return static_cast<double>(b.bytes); },
        [&](const BucketRate& b) { return b.ranks == ranks && b.dtype == dtype && b.host == host && b.seconds > 0; });
    if (best == nullptr) return std::nullopt;
    return best->seconds * bytes / static_cast<double>(best->bytes);
}

std::optional<double> ProbedRates::host_link_bytes_per_s(double bytes) const {
    const HostLinkRate* best = nearest_size(
        host_links, bytes, [](const HostLinkRate& l) { return static_cast<double>(l.bytes); },
        [](const HostLinkRate& l) { return l.bytes_per_s > 0; });
    if (best == nullptr) return std::nullopt;
    return best->bytes_per_s;
}

}  // namespace tune
