// CPU attention, forward plus backward, flash against eager: one sequence,
// 8 heads, d = 64, fp32, s = 512 to 4096 (the target: flash at most
// 1.0x eager's time, with O(s) memory instead of O(s^2)). The counters give
// each kernel's kept bytes and workspace; the last lines the flash/eager
// ratio per (s, threads). Run: build/bench/bench_attention
//   --benchmark_repetitions=5 --benchmark_min_time=0.01
//   --benchmark_enable_random_interleaving=true (the ratio uses the fastest
//   repetitions; the 2-core build machine is shared).
//
// Measured 2026-11-23 on the 2-core Xeon build machine (process CPU time,
// fastest of 5-15 repetitions, load average 3-5 from other builds):
//   flash/eager       s=512   1024   2048
//   before, 1 thread   1.56   1.48   1.52   (two-pass backward, sgemm tiles)
//   before, 2 threads  1.79   1.55   1.50
//   now, 1 thread      0.39   0.38   0.34   (one-pass backward, tile_gemm.h)
//   now, 2 threads     0.50   0.37   0.36
//   now, OPENBLAS_CORETYPE=SkylakeX, 1 thread   1.04  0.93  0.92
//   now, OPENBLAS_CORETYPE=SkylakeX, 2 threads  1.00  1.04  1.08
// OpenBLAS 0.3.21 does not know this CPU and runs its SSE (Prescott) kernels,
// which eager's large GEMMs use; forced to its AVX-512 kernels eager is 2.8x
// faster and flash about even with it. Memory, s = 512 / 1024 / 2048, 1
// thread: kept 0.016 / 0.031 / 0.063 MiB (lse) against 8 / 32 / 128 MiB (P);
// workspace 0.39 / 0.64 / 1.14 MiB against 3 / 10 / 36 MiB.
#include <benchmark/benchmark.h>
#include <unistd.h>

#include <algorithm>
#include <map>
#include <random>
#include <string>
#include <utility>
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
    AttentionForwardArgs f{.shape = shape,
                           .kind = kind,
                           .q = q.data(),
                           .k = k.data(),
                           .v = v.data(),
                           .q_stride = HD,
                           .k_stride = HD,
                           .v_stride = HD,
                           .out = out.data(),
                           .out_stride = HD,
                           .probs = flash ? nullptr : kept.data(),
                           .lse = flash ? kept.data() : nullptr};
    AttentionBackwardArgs b{.shape = shape,
                            .kind = kind,
                            .q = q.data(),
                            .k = k.data(),
                            .v = v.data(),
                            .q_stride = HD,
                            .k_stride = HD,
                            .v_stride = HD,
                            .probs = flash ? nullptr : kept.data(),
                            .out = flash ? out.data() : nullptr,
                            .lse = flash ? kept.data() : nullptr,
                            .out_stride = HD,
                            .dout = dout.data(),
                            .dout_stride = HD,
                            .dq = dq.data(),
                            .dk = dk.data(),
                            .dv = dv.data()};
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
    // CPU time of every thread, so the ratio at 2 threads compares the work
    // even when other processes share the cores (wall time is printed too).
    // The fastest repetition is the least disturbed by them: the ratio uses it.
    b->Unit(benchmark::kMillisecond)
        ->MeasureProcessCPUTime()
        ->ComputeStatistics("min", [](const std::vector<double>& v) { return *std::min_element(v.begin(), v.end()); });
}

// The console table, then flash time / eager time per (s, threads): of the
// fastest repetitions when repetitions ran, else of the single runs.
class RatioReporter : public benchmark::ConsoleReporter {
public:
    RatioReporter() : ConsoleReporter(isatty(STDOUT_FILENO) ? OO_ColorTabular : OO_Tabular) {}

    void ReportRuns(const std::vector<Run>& runs) override {
        ConsoleReporter::ReportRuns(runs);
        for (const Run& r : runs) {
            if (r.run_type == Run::RT_Aggregate && r.aggregate_name != "min") continue;
            const bool flash = r.run_name.function_name.find("flash") != std::string::npos;
            auto& entry = times_[r.run_name.args];
            (flash ? entry.second : entry.first) = {r.GetAdjustedRealTime(), r.GetAdjustedCPUTime()};
        }
    }
    void Finalize() override {
        ConsoleReporter::Finalize();
        for (const auto& [args, t] : times_) {
            const auto& [eager, flash] = t;
            if (eager.first <= 0 || flash.first <= 0) continue;
            GetOutputStream() << "flash/eager s/threads=" << args << ": wall " << flash.first / eager.first << ", cpu "
                              << flash.second / eager.second << "\n";
        }
    }

private:
    using Times = std::pair<double, double>;                // (wall, cpu)
    std::map<std::string, std::pair<Times, Times>> times_;  // args -> (eager, flash)
};

}  // namespace

BENCHMARK(BM_attention_eager)->Apply(shapes);
BENCHMARK(BM_attention_flash)->Apply(shapes);
int main(int argc, char** argv) {
    benchmark::Initialize(&argc, argv);
    if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
    RatioReporter reporter;
    benchmark::RunSpecifiedBenchmarks(&reporter);
    benchmark::Shutdown();
    return 0;
}
