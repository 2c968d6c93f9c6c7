// CPU attention, forward plus backward, flash against eager: one sequence,
// 8 heads, d = 64, fp32, s = 512 to 4096 (the target: flash at most
// 1.0x eager's time, with O(s) memory instead of O(s^2)). The counters give
// each kernel's kept bytes and workspace. Run: build/bench/bench_attention.
#include <benchmark/benchmark.h>

#include <random>
#include <vector>

#include "kernels/cpu/cpu_backend.h"

using namespace tune::kernels;

namespace {

std::vector<float> randn(std::size_t n, unsigned seed) {
    std::mt19937 g(seed);
    std::normal_distribution<float> d;
    std::vector<float> v(n);
    for (auto& x : v) x = d(g);
    return v;
}

void BM_attention(benchmark::State& st, AttentionKind kind) {
    CpuBackend be(CpuBackendOptions{.threads = static_cast<int>(st.range(1))});
    const std::int64_t S = st.range(0), H = 8, D = 64, HD = H * D;
    const AttentionShape shape{1, S, H, H, D};
    const bool flash = kind == AttentionKind::fused;
    auto q = randn(S * HD, 1), k = randn(S * HD, 2), v = randn(S * HD, 3), dout = randn(S * HD, 4);
    std::vector<float> out(S * HD), dq(S * HD), dk(S * HD), dv(S * HD);
    std::vector<float> kept(flash ? H * S : H * S * S);
    std::vector<float> ws(be.attention_workspace_bytes(shape, kind, DType::f32) / 4);
    const Workspace w{ws.data(), ws.size() * 4};
    AttentionForwardArgs f{.shape = shape, .kind = kind, .q = q.data(), .k = k.data(), .v = v.data(),
                           .q_stride = HD, .k_stride = HD, .v_stride = HD, .out = out.data(), .out_stride = HD,
                           .probs = flash ? nullptr : kept.data(), .lse = flash ? kept.data() : nullptr};
    AttentionBackwardArgs b{.shape = shape, .kind = kind, .q = q.data(), .k = k.data(), .v = v.data(),
                            .q_stride = HD, .k_stride = HD, .v_stride = HD,
                            .probs = flash ? nullptr : kept.data(), .out = flash ? out.data() : nullptr,
                            .lse = flash ? kept.data() : nullptr, .out_stride = HD, .dout = dout.data(),
                            .dout_stride = HD, .dq = dq.data(), .dk = dk.data(), .dv = dv.data()};
    for (auto _ : st) {
        be.attention_forward(f, w);
        be.attention_backward(b, w);
    }
    st.counters["kept_MiB"] = static_cast<double>(kept.size() * 4) / (1 << 20);
    st.counters["workspace_MiB"] = static_cast<double>(ws.size() * 4) / (1 << 20);
}

void BM_attention_eager(benchmark::State& st) { BM_attention(st, AttentionKind::materialized); }
void BM_attention_flash(benchmark::State& st) { BM_attention(st, AttentionKind::fused); }

void shapes(benchmark::internal::Benchmark* b) {
    for (std::int64_t s : {512, 1024, 2048, 4096})
        for (std::int64_t threads : {1, 2}) b->Args({s, threads});
    b->Unit(benchmark::kMillisecond);
}

}  // namespace

BENCHMARK(BM_attention_eager)->Apply(shapes);
BENCHMARK(BM_attention_flash)->Apply(shapes);
BENCHMARK_MAIN();
