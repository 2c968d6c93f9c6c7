// Whole-grid estimation speed: the estimator must do at least 1,000,000
// configurations per second on one core (items_per_second below).
#include <benchmark/benchmark.h>

#include <random>
#include <vector>

#include "core/pareto.h"
#include "core/presets.h"
#include "estimate/estimate.h"

namespace {

using namespace tune;

// Every combination of the search dimensions, as a sweep expands them.
std::vector<TrialConfig> grid(const char* model, std::uint32_t world_size) {
    std::vector<TrialConfig> out;
    TrialConfig c;
    c.model = *find_model(model);
    c.world_size = world_size;
    for (Optimizer o : kOptimizers)
        for (Precision p : kPrecisions)
            for (std::uint32_t z : {0u, 1u, 2u, 3u})
                for (std::uint32_t ga : {1u, 4u, 16u})
                    for (Checkpointing ck : kCheckpointings)
                        for (std::uint32_t s : {1024u, 2048u, 4096u})
                            for (std::uint32_t b : {1u, 2u, 4u, 8u}) {
                                c.optimizer = o, c.precision = p, c.zero_stage = z, c.grad_accum = ga;
                                c.checkpointing = ck, c.context = s, c.micro_batch = b;
                                out.push_back(c);
                            }
    return out;
}

void run_grid(benchmark::State& state, const char* model, const char* device, std::uint32_t world_size) {
    const std::vector<TrialConfig> configs = grid(model, world_size);
    const Hardware hw = *find_device(device);
    const ModelSpec spec = configs.front().model;
    EstimateOptions options;
    std::uint64_t fitting = 0;
    for (auto _ : state) {
        for (const TrialConfig& c : configs) {
            const Estimate e = estimate(spec, c, hw, options);
            fitting += e.fits;
            benchmark::DoNotOptimize(e.tokens_per_s);
        }
    }
    benchmark::DoNotOptimize(fitting);
    state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations() * configs.size()));
    state.counters["grid"] = static_cast<double>(configs.size());
}

void BM_EstimateGridLlama7bH100x8(benchmark::State& state) { run_grid(state, "llama-7b", "h100-80gb", 8); }
void BM_EstimateGridLlama70bH100x64(benchmark::State& state) { run_grid(state, "llama-70b", "h100-80gb", 64); }
void BM_EstimateGridSmallCpux4(benchmark::State& state) { run_grid(state, "small", "cpu", 4); }

void BM_ParetoRanks(benchmark::State& state) {
    std::mt19937_64 rng(3);
    std::uniform_real_distribution<double> u(0, 1);
    std::vector<ParetoPoint> points(static_cast<std::size_t>(state.range(0)));
    for (auto& p : points) p = {std::floor(u(rng) * 8e10), u(rng) * 1e5};
    for (auto _ : state) benchmark::DoNotOptimize(pareto_ranks(points));
    state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations() * points.size()));
}

}  // namespace

BENCHMARK(BM_EstimateGridLlama7bH100x8);
BENCHMARK(BM_EstimateGridLlama70bH100x64);
BENCHMARK(BM_EstimateGridSmallCpux4);
BENCHMARK(BM_ParetoRanks)->Arg(4320)->Arg(1 << 20);

BENCHMARK_MAIN();
