#include "probe/probes.h"

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdio>
#include <functional>
#include <map>
#include <cmath>
#include <set>
#include <tuple>

#include <fmt/format.h>

#include "search/estimate_time.h"

namespace tune::probe {
namespace {

using Clock = std::chrono::steady_clock;

// Seconds per call of `op`: one untimed call, then calls until min_seconds passed.
double seconds_per_call(kernels::Backend& backend, const std::function<void()>& op, double min_seconds,
                        double* spent) {
    const auto begin = Clock::now();
    op();
    backend.synchronize();
    const auto start = Clock::now();
    std::size_t calls = 0;
    double elapsed = 0;
    do {
        op();
        backend.synchronize();
        ++calls;
        elapsed = std::chrono::duration<double>(Clock::now() - start).count();
    } while (elapsed < min_seconds);
    if (spent) *spent = std::chrono::duration<double>(Clock::now() - begin).count();
    return elapsed / static_cast<double>(calls);
}

kernels::DType dtype_of(std::uint32_t bytes) { return bytes == 4 ? kernels::DType::f32 : kernels::DType::bf16; }
const char* dtype_name(std::uint32_t bytes) { return bytes == 4 ? "f32" : "bf16"; }

// A backend buffer freed on scope exit, zero-filled (probes time arithmetic, not values).
struct Scratch {
    kernels::Backend& backend;
    void* ptr = nullptr;
    Scratch(kernels::Backend& b, std::uint64_t bytes) : backend(b), bytes_(bytes) {
        if (bytes > 0) {
            ptr = b.allocate(bytes);
            b.fill_zero(ptr, bytes);
        }
    }
    ~Scratch() {
        if (ptr) backend.deallocate(ptr, bytes_);
    }
    Scratch(const Scratch&) = delete;
    Scratch& operator=(const Scratch&) = delete;

private:
    std::uint64_t bytes_;
};

double probe_gemm(kernels::Backend& backend, const GemmRate& g, const ProbeSettings& s, double* spent) {
    const kernels::DType dt = dtype_of(g.dtype_bytes);
    Scratch a(backend, static_cast<std::uint64_t>(g.m * g.k) * g.dtype_bytes);
    Scratch b(backend, static_cast<std::uint64_t>(g.k * g.n) * g.dtype_bytes);
    Scratch c(backend, static_cast<std::uint64_t>(g.m * g.n) * g.dtype_bytes);
    kernels::GemmArgs args;
    args.m = g.m, args.n = g.n, args.k = g.k;
    // The trainer's forward layout: activations (m, k) times weights stored (n, k).
    args.trans_b = true;
    args.a = a.ptr, args.lda = g.k;
    args.b = b.ptr, args.ldb = g.k;
    args.c = c.ptr, args.ldc = g.n;
    args.a_dtype = args.b_dtype = args.c_dtype = dt;
    Scratch ws(backend, backend.gemm_workspace_bytes(args));
    const double t = seconds_per_call(backend, [&] { backend.gemm(args, {ws.ptr, backend.gemm_workspace_bytes(args)}); },
                                      s.min_seconds, spent);
    return 2.0 * static_cast<double>(g.m) * static_cast<double>(g.n) * static_cast<double>(g.k) / t;
}

void probe_attention(kernels::Backend& backend, AttentionRate& a, const ProbeSettings& s, double* spent) {
    const kernels::DType dt = dtype_of(a.dtype_bytes);
    kernels::AttentionShape shape{a.batch, a.seq, a.heads, a.kv_heads, a.head_dim};
    const auto kind = a.fused ? kernels::AttentionKind::fused : kernels::AttentionKind::materialized;
    const std::uint64_t e = a.dtype_bytes;
    const std::uint64_t q_bytes = static_cast<std::uint64_t>(a.batch * a.seq * a.heads * a.head_dim) * e;
    const std::uint64_t kv_bytes = static_cast<std::uint64_t>(a.batch * a.seq * a.kv_heads * a.head_dim) * e;
    Scratch q(backend, q_bytes), k(backend, kv_bytes), v(backend, kv_bytes), out(backend, q_bytes);
    Scratch dout(backend, q_bytes), dq(backend, q_bytes), dk(backend, kv_bytes), dv(backend, kv_bytes);
    Scratch probs(backend, a.fused ? 0 : static_cast<std::uint64_t>(a.batch * a.heads * a.seq * a.seq) * e);
    Scratch lse(backend, a.fused ? static_cast<std::uint64_t>(a.batch * a.heads * a.seq) * 4 : 0);
    const std::uint64_t ws_bytes = backend.attention_workspace_bytes(shape, kind, dt);
    Scratch ws(backend, ws_bytes);
    kernels::AttentionForwardArgs f;
    f.shape = shape, f.kind = kind, f.dtype = dt;
    f.q = q.ptr, f.k = k.ptr, f.v = v.ptr;
    f.q_stride = a.heads * a.head_dim, f.k_stride = f.v_stride = a.kv_heads * a.head_dim;
    f.out = out.ptr, f.out_stride = f.q_stride;
    f.probs = probs.ptr, f.lse = static_cast<float*>(lse.ptr);
    kernels::AttentionBackwardArgs bw;
    bw.shape = shape, bw.kind = kind, bw.dtype = dt;
    bw.q = q.ptr, bw.k = k.ptr, bw.v = v.ptr;
    bw.q_stride = f.q_stride, bw.k_stride = f.k_stride, bw.v_stride = f.v_stride;
    bw.probs = probs.ptr, bw.out = out.ptr, bw.lse = static_cast<const float*>(lse.ptr), bw.out_stride = f.q_stride;
    bw.dout = dout.ptr, bw.dout_stride = f.q_stride;
    bw.dq = dq.ptr, bw.dk = dk.ptr, bw.dv = dv.ptr;
    double spent_f = 0, spent_b = 0;
    a.forward_s = seconds_per_call(backend, [&] { backend.attention_forward(f, {ws.ptr, ws_bytes}); }, s.min_seconds,
                                   &spent_f);
    a.backward_s = seconds_per_call(backend, [&] { backend.attention_backward(bw, {ws.ptr, ws_bytes}); },
                                    s.min_seconds, &spent_b);
    if (spent) *spent = spent_f + spent_b;
}

// AdamW over fp32 weights, gradients and states: 4 (g) + 8 (p) + 16 (m, v) bytes per element.
double probe_bandwidth(kernels::Backend& backend, const ProbeSettings& s, double* spent) {
    const std::uint64_t n = s.bandwidth_elements;
    Scratch p(backend, 4 * n), g(backend, 4 * n), m(backend, 4 * n), v(backend, 4 * n);
    kernels::ParamTensor t;
    t.n = static_cast<std::int64_t>(n);
    t.param = p.ptr, t.grad = g.ptr;
    const double sec = seconds_per_call(
        backend, [&] { backend.adamw_update(t, m.ptr, v.ptr, kernels::DType::f32, kernels::AdamWParams{}); },
        s.min_seconds, spent);
    return 28.0 * static_cast<double>(n) / sec;
}

constexpr std::array<std::pair<Collective, const char*>, 3> kCollectiveNames{
    {{Collective::all_reduce, "all-reduce"}, {Collective::reduce_scatter, "reduce-scatter"},
     {Collective::all_gather, "all-gather"}}};

const char* collective_name(Collective op) {
    for (const auto& [o, name] : kCollectiveNames)
        if (o == op) return name;
    return "?";
}

// At most three message sizes per rank count: the smallest, the largest and the one
// nearest their geometric mean, so a sweep over many shapes still probes quickly.
std::vector<std::uint64_t> probed_sizes(const std::set<std::uint64_t>& sizes) {
    std::vector<std::uint64_t> all(sizes.begin(), sizes.end());
    if (all.size() <= 3) return all;
    const double middle = std::sqrt(static_cast<double>(all.front()) * static_cast<double>(all.back()));
    const auto mid = std::min_element(all.begin() + 1, all.end() - 1, [&](std::uint64_t a, std::uint64_t b) {
        return std::fabs(std::log(static_cast<double>(a) / middle)) < std::fabs(std::log(static_cast<double>(b) / middle));
    });
    return {all.front(), *mid, all.back()};
}

void plan_collectives(const ModelSpec& model, const std::vector<TrialConfig>& configs, ProbedRates& plan) {
    std::map<std::uint32_t, std::set<std::uint64_t>> sizes;  // ranks -> message bytes
    for (const TrialConfig& c : configs)
        if (c.world_size > 1)
            sizes[c.world_size].insert(static_cast<std::uint64_t>(collective_message_bytes(model, c)));
    for (const auto& [ranks, bytes] : sizes)
        for (std::uint64_t b : probed_sizes(bytes))
            for (const auto& [op, name] : kCollectiveNames) plan.collectives.push_back({op, ranks, b, 0});
}

}  // namespace

ProbedRates plan_probes(const ModelSpec& model, const std::vector<TrialConfig>& configs) {
    std::set<std::tuple<std::int64_t, std::uint32_t>> tokens;          // (rows, dtype bytes)
    // (batch, seq, dtype bytes, flash): each attention implementation the sweep runs is probed.
    std::set<std::tuple<std::int64_t, std::int64_t, std::uint32_t, bool>> attention;
    for (const TrialConfig& c : configs) {
        tokens.insert({static_cast<std::int64_t>(c.micro_batch) * c.context, weight_bytes(c.precision)});
        attention.insert({c.micro_batch, c.context, weight_bytes(c.precision), c.attention == Attention::flash});
    }
    const auto h = static_cast<std::int64_t>(model.hidden), kv = static_cast<std::int64_t>(model.kv_dim());
    const auto f = static_cast<std::int64_t>(model.ffn), v = static_cast<std::int64_t>(model.vocab);
    ProbedRates plan;
    // (n, k) of q and o, k and v, gate and up, down, the LM head.
    const std::array<std::pair<std::int64_t, std::int64_t>, 5> shapes{{{h, h}, {kv, h}, {f, h}, {h, f}, {v, h}}};
    for (const auto& [t, bytes] : tokens)
        for (const auto& [n, k] : shapes) {
            const bool seen = std::any_of(plan.gemm.begin(), plan.gemm.end(), [&](const GemmRate& g) {
                return g.m == t && g.n == n && g.k == k && g.dtype_bytes == bytes;
            });
            if (!seen) plan.gemm.push_back({t, n, k, bytes, 0});
        }
    for (const auto& [b, s, bytes, flash] : attention)
        plan.attention.push_back({b, s, static_cast<std::int64_t>(model.heads),
                                  static_cast<std::int64_t>(model.kv_heads),
                                  static_cast<std::int64_t>(model.head_dim()), bytes, flash, 0, 0});
    plan.memory_bytes_per_s = 1;  // asked for
    plan_collectives(model, configs, plan);
    return plan;
}

ProbedRates run_probes(kernels::Backend& backend, const ProbedRates& plan, const ProbeSettings& settings,
                       std::vector<ProbeRecord>* records) {
    ProbedRates out = plan;
    out.collectives.clear();  // they need ranks: a CollectiveProber's
    std::vector<double> spent_gemm(out.gemm.size()), spent_attention(out.attention.size());
    for (std::size_t i = 0; i < out.gemm.size(); ++i)
        out.gemm[i].flops_per_s = probe_gemm(backend, out.gemm[i], settings, &spent_gemm[i]);
    for (std::size_t i = 0; i < out.attention.size(); ++i)
        probe_attention(backend, out.attention[i], settings, &spent_attention[i]);
    double spent_bandwidth = 0;
    if (plan.memory_bytes_per_s > 0) out.memory_bytes_per_s = probe_bandwidth(backend, settings, &spent_bandwidth);
    if (records) {
        *records = records_of(out);
        // records_of lists gemm, then attention (forward, backward), then the bandwidth.
        std::size_t r = 0;
        for (double s : spent_gemm) (*records)[r++].seconds = s;
        for (double s : spent_attention) {
            (*records)[r++].seconds = s / 2;
            (*records)[r++].seconds = s / 2;
        }
        if (r < records->size()) (*records)[r].seconds = spent_bandwidth;
    }
    return out;
}

std::string collective_record_name(const CollectiveRate& c) {
    return fmt::format("busbw {} n={} bytes={}", collective_name(c.op), c.ranks, c.bytes);
}

std::optional<CollectiveRate> parse_collective_record(const std::string& name) {
    char op[16] = {};
    unsigned ranks = 0;
    unsigned long long bytes = 0;
    if (std::sscanf(name.c_str(), "busbw %15s n=%u bytes=%llu", op, &ranks, &bytes) != 3) return std::nullopt;
    for (const auto& [o, text] : kCollectiveNames)
        if (std::string(op) == text) return CollectiveRate{o, ranks, bytes, 0};
    return std::nullopt;
}

std::vector<ProbeRecord> records_of(const ProbedRates& rates) {
    std::vector<ProbeRecord> out;
    for (const GemmRate& g : rates.gemm)
        out.push_back({fmt::format("gemm {} m={} n={} k={}", dtype_name(g.dtype_bytes), g.m, g.n, g.k),
                       g.flops_per_s, "FLOP/s", 0});
    for (const AttentionRate& a : rates.attention) {
        const std::string shape = fmt::format("attention {} {} b={} s={} h={} kvh={} d={}", a.fused ? "fused" : "eager",
                                              dtype_name(a.dtype_bytes), a.batch, a.seq, a.heads, a.kv_heads,
                                              a.head_dim);
        out.push_back({shape + " forward", a.forward_s, "s", 0});
        out.push_back({shape + " backward", a.backward_s, "s", 0});
    }
    if (rates.memory_bytes_per_s > 0) out.push_back({"bandwidth adamw f32", rates.memory_bytes_per_s, "B/s", 0});
    for (const CollectiveRate& c : rates.collectives)
        out.push_back({collective_record_name(c), c.bus_bytes_per_s, "B/s", 0});
    return out;
}

ProbedRates rates_of(const std::vector<ProbeRecord>& records) {
    ProbedRates out;
    for (const ProbeRecord& r : records) {
        char dtype[8] = {}, impl[8] = {}, pass[12] = {};
        long long m = 0, n = 0, k = 0, b = 0, s = 0, h = 0, kvh = 0, d = 0;
        if (std::sscanf(r.name.c_str(), "gemm %7s m=%lld n=%lld k=%lld", dtype, &m, &n, &k) == 4) {
            out.gemm.push_back({m, n, k, std::string(dtype) == "f32" ? 4u : 2u, r.value});
        } else if (std::sscanf(r.name.c_str(), "attention %7s %7s b=%lld s=%lld h=%lld kvh=%lld d=%lld %11s", impl,
                               dtype, &b, &s, &h, &kvh, &d, pass) == 8) {
            const bool fused = std::string(impl) == "fused";
            const std::uint32_t bytes = std::string(dtype) == "f32" ? 4u : 2u;
            auto it = std::find_if(out.attention.begin(), out.attention.end(), [&](const AttentionRate& a) {
                return a.batch == b && a.seq == s && a.heads == h && a.kv_heads == kvh && a.head_dim == d &&
                       a.dtype_bytes == bytes && a.fused == fused;
            });
            if (it == out.attention.end()) {
                out.attention.push_back({b, s, h, kvh, d, bytes, fused, 0, 0});
                it = out.attention.end() - 1;
            }
            (std::string(pass) == "forward" ? it->forward_s : it->backward_s) = r.value;
        } else if (r.name == "bandwidth adamw f32") {
            out.memory_bytes_per_s = r.value;
        } else if (auto c = parse_collective_record(r.name)) {
            c->bus_bytes_per_s = r.value;
            out.collectives.push_back(*c);
        }
    }
    return out;
}

}  // namespace tune::probe
