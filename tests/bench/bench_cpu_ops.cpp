// Per-op timings of the CPU backend at the shapes of the `small` preset
// (V 2048, C 256, H 8, KVH 4, F 688) with B 4, S 256, fp32 and bf16, so a
// training step's cost can be read op by op. The argument is the thread count.
#include <benchmark/benchmark.h>

#include <cstdint>
#include <random>
#include <vector>

#include "kernels/cpu/cpu_backend.h"

using namespace tune::kernels;

namespace {

constexpr std::int64_t B = 4, S = 256, H = 8, KV = 4, D = 32, C = 256, F = 688, V = 2048, T = B * S;

std::vector<float> randn(std::int64_t n, unsigned seed) {
    std::mt19937 gen(seed);
    std::normal_distribution<float> dist;
    std::vector<float> v(static_cast<std::size_t>(n));
    for (auto& x : v) x = dist(gen);
    return v;
}

// Buffers in the benchmark's dtype (bf16 as raw halves of the same size for timing).
std::vector<std::uint16_t> halves(std::int64_t n) {
    return std::vector<std::uint16_t>(static_cast<std::size_t>(n), 0x3f80);
}

CpuBackend backend_for(const benchmark::State& st) {
    return CpuBackend(CpuBackendOptions{.threads = static_cast<int>(st.range(0))});
}

void BM_gemm_mlp(benchmark::State& st) {  // gate projection (T, C) x (F, C)^T
    CpuBackend be = backend_for(st);
    auto x = randn(T * C, 1), w = randn(F * C, 2);
    std::vector<float> y(T * F);
    const GemmArgs g{.m = T,
                     .n = F,
                     .k = C,
                     .trans_b = true,
                     .a = x.data(),
                     .lda = C,
                     .b = w.data(),
                     .ldb = C,
                     .c = y.data(),
                     .ldc = F};
    for (auto _ : st) be.gemm(g, {});
    st.counters["GFLOP/s"] =
        benchmark::Counter(2.0 * T * F * C, benchmark::Counter::kIsIterationInvariantRate, benchmark::Counter::kIs1000);
}

void BM_gemm_mlp_bf16(benchmark::State& st) {
    CpuBackend be = backend_for(st);
    auto x = halves(T * C), w = halves(F * C), y = halves(T * F);
    const GemmArgs g{.m = T,
                     .n = F,
                     .k = C,
                     .trans_b = true,
                     .a = x.data(),
                     .lda = C,
                     .b = w.data(),
                     .ldb = C,
                     .c = y.data(),
                     .ldc = F,
                     .a_dtype = DType::bf16,
                     .b_dtype = DType::bf16,
                     .c_dtype = DType::bf16};
    std::vector<float> ws(be.gemm_workspace_bytes(g) / 4);
    for (auto _ : st) be.gemm(g, {ws.data(), ws.size() * 4});
}

struct Attention {
    std::vector<float> qkv = randn(T * (H + 2 * KV) * D, 3), out = std::vector<float>(T * H * D),
                       probs = std::vector<float>(B * H * S * S), dqkv = std::vector<float>(qkv.size()),
                       dout = randn(T * H * D, 4);
    const AttentionShape shape{B, S, H, KV, D};
    const std::int64_t stride = (H + 2 * KV) * D;
    AttentionForwardArgs forward() {
        return {.shape = shape,
                .q = qkv.data(),
                .k = qkv.data() + H * D,
                .v = qkv.data() + (H + KV) * D,
                .q_stride = stride,
                .k_stride = stride,
                .v_stride = stride,
                .out = out.data(),
                .out_stride = H * D,
                .probs = probs.data()};
    }
    AttentionBackwardArgs backward() {
        return {.shape = shape,
                .q = qkv.data(),
                .k = qkv.data() + H * D,
                .v = qkv.data() + (H + KV) * D,
                .q_stride = stride,
                .k_stride = stride,
                .v_stride = stride,
                .probs = probs.data(),
                .dout = dout.data(),
                .dout_stride = H * D,
                .dq = dqkv.data(),
                .dk = dqkv.data() + H * D,
                .dv = dqkv.data() + (H + KV) * D};
    }
};

void BM_attention_forward(benchmark::State& st) {
    CpuBackend be = backend_for(st);
    Attention a;
    std::vector<float> ws(be.attention_workspace_bytes(a.shape, AttentionKind::materialized, DType::f32) / 4);
    const auto args = a.forward();
    for (auto _ : st) be.attention_forward(args, {ws.data(), ws.size() * 4});
}

void BM_attention_backward(benchmark::State& st) {
    CpuBackend be = backend_for(st);
    Attention a;
    std::vector<float> ws(be.attention_workspace_bytes(a.shape, AttentionKind::materialized, DType::f32) / 4);
    be.attention_forward(a.forward(), {ws.data(), ws.size() * 4});
    const auto args = a.backward();
    for (auto _ : st) be.attention_backward(args, {ws.data(), ws.size() * 4});
}

void BM_rmsnorm_forward_backward(benchmark::State& st) {
    CpuBackend be = backend_for(st);
    auto x = randn(T * C, 5), w = randn(C, 6), dy = randn(T * C, 7);
    std::vector<float> y(T * C), rstd(T), dx(T * C), dw(C);
    for (auto _ : st) {
        be.rmsnorm_forward(y.data(), rstd.data(), x.data(), w.data(), T, C, 1e-5f, DType::f32);
        be.rmsnorm_backward(dx.data(), dw.data(), dy.data(), x.data(), w.data(), rstd.data(), T, C, true, DType::f32);
    }
}

void BM_swiglu_forward_backward(benchmark::State& st) {
    CpuBackend be = backend_for(st);
    auto g = randn(T * F, 8), u = randn(T * F, 9), dy = randn(T * F, 10);
    std::vector<float> y(T * F), dg(T * F), du(T * F);
    for (auto _ : st) {
        be.swiglu_forward(y.data(), g.data(), u.data(), T, F, F, DType::f32);
        be.swiglu_backward(dg.data(), du.data(), dy.data(), g.data(), u.data(), T, F, F, DType::f32);
    }
}

void BM_cross_entropy(benchmark::State& st) {
    CpuBackend be = backend_for(st);
    auto z = randn(T * V, 11);
    std::vector<float> dz(T * V), losses(T);
    std::vector<std::int32_t> targets(T);
    for (std::int64_t i = 0; i < T; ++i) targets[static_cast<std::size_t>(i)] = static_cast<std::int32_t>(i * 7 % V);
    const CrossEntropyArgs args{.rows = T,
                                .vocab = V,
                                .logits = z.data(),
                                .targets = targets.data(),
                                .losses = losses.data(),
                                .dlogits = dz.data(),
                                .grad_scale = 1.0f / T};
    for (auto _ : st) be.cross_entropy(args);
}

void BM_adamw_4M(benchmark::State& st) {
    CpuBackend be = backend_for(st);
    const std::int64_t n = 4'000'000;
    auto p = randn(n, 12), g = randn(n, 13);
    std::vector<float> m(static_cast<std::size_t>(n)), v(static_cast<std::size_t>(n));
    const ParamTensor t{.n = n, .param = p.data(), .grad = g.data()};
    for (auto _ : st) be.adamw_update(t, m.data(), v.data(), DType::f32, AdamWParams{});
    st.SetBytesProcessed(st.iterations() * n * 28);
}

}  // namespace

BENCHMARK(BM_gemm_mlp)->Arg(1)->Arg(2)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_gemm_mlp_bf16)->Arg(1)->Arg(2)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_attention_forward)->Arg(1)->Arg(2)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_attention_backward)->Arg(1)->Arg(2)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_rmsnorm_forward_backward)->Arg(1)->Arg(2)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_swiglu_forward_backward)->Arg(1)->Arg(2)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_cross_entropy)->Arg(1)->Arg(2)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_adamw_4M)->Arg(1)->Arg(2)->Unit(benchmark::kMillisecond);
BENCHMARK_MAIN();
