// Results store throughput: recording complete trials (trial row + one memory
// row per component + one row per step, one transaction each), the driver's
// claim-and-record cycle, batch enumeration, a best-fit query and the Pareto
// front over 10,000 trials.
// The database is a real file (WAL) in the system temp directory.
#include <benchmark/benchmark.h>

#include <unistd.h>

#include <filesystem>

#include <fmt/format.h>

#include "core/presets.h"
#include "store/best.h"
#include "store/store.h"

namespace {

using namespace tune;

std::string fresh_path(const char* name) {
    auto path = std::filesystem::temp_directory_path() / fmt::format("tune-bench-{}-{}.db", ::getpid(), name);
    for (const char* suffix : {"", "-wal", "-shm"}) std::filesystem::remove(path.string() + suffix);
    return path.string();
}

TrialConfig config(int i) {
    TrialConfig c;
    c.model = *find_model("tiny");
    c.optimizer = kOptimizers[static_cast<std::size_t>(i) % kOptimizers.size()];
    c.context = 64u << (i % 4);
    c.world_size = 1u << (i % 3);
    c.seed = static_cast<std::uint64_t>(i);
    return c;
}

Estimate estimate(int i) {
    Estimate e;
    for (std::size_t k = 0; k < kComponentCount; ++k)
        e.memory.bytes[k] = (k + 1) * 1000 + static_cast<std::uint64_t>(i);
    e.memory.peak = e.memory.total();
    e.memory.peak_phase = "optimizer-step";
    e.step_s = 0.1;
    e.tokens_per_s = 1000 + i;
    e.fits = true;
    return e;
}

TrialResult result(const TrialConfig& c, int i) {
    TrialResult r;
    r.status = TrialStatus::ok;
    r.config = c;
    for (std::size_t k = 0; k < kComponentCount; ++k)
        r.memory.bytes[k] = (k + 1) * 2000 + static_cast<std::uint64_t>(i);
    r.memory.peak = r.memory.total();
    r.memory.peak_phase = "optimizer-step";
    r.rank_peaks = {r.memory.peak};
    r.step_ms = {30, 29, 21, 22, 21.5, 20.5};  // six steps: warmup 2 + 4 timed
    r.losses = {5.5, 5.4, 5.3, 5.2, 5.1, 5.0};
    r.tokens_per_s = 5000 + (i * 7919) % 10007;
    r.mfu = 0.4;
    return r;
}

SweepRecord sweep_record() {
    SweepRecord s;
    s.name = "bench";
    s.spec_text = "name = \"bench\"";
    s.spec_hash = stable_hash(s.spec_text);
    s.host = "bench-host";
    return s;
}

// A store with n pending trials; returns the sweep id.
SweepId populate(Store& db, int n) {
    const SweepId sweep = db.open_sweep(sweep_record(), false).id;
    std::vector<NewTrial> trials;
    for (int i = 0; i < n; ++i) trials.push_back({config(i), TrialStatus::pending, "", estimate(i), 0, {}});
    db.add_trials(sweep, trials);
    return sweep;
}

void BM_RecordResult(benchmark::State& state) {
    const std::string path = fresh_path("record");
    Store db(path, Store::Mode::read_write);
    const int n = static_cast<int>(state.max_iterations);
    populate(db, n);
    const auto rows = db.trials({std::nullopt, std::nullopt, false, false});
    std::size_t next = 0;
    for (auto _ : state) {
        const auto& t = rows[next % rows.size()];
        db.record_result(t.id, result(t.result.config, static_cast<int>(next)), "tail", now_timestamp(),
                         now_timestamp());
        ++next;
    }
    state.SetItemsProcessed(state.iterations());
    state.counters["records_per_s"] =
        benchmark::Counter(static_cast<double>(state.iterations()), benchmark::Counter::kIsRate);
}
BENCHMARK(BM_RecordResult)->Iterations(20000)->UseRealTime()->Unit(benchmark::kMicrosecond);

void BM_ClaimAndRecord(benchmark::State& state) {
    const std::string path = fresh_path("claim");
    Store db(path, Store::Mode::read_write);
    const SweepId sweep = populate(db, static_cast<int>(state.max_iterations));
    int i = 0;
    for (auto _ : state) {
        auto claimed = db.claim_next_pending(sweep);
        db.record_result(claimed->id, result(claimed->config, i++), "tail", now_timestamp(), now_timestamp());
    }
    state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_ClaimAndRecord)->Iterations(10000)->UseRealTime()->Unit(benchmark::kMicrosecond);

void BM_AddTrials(benchmark::State& state) {
    const std::string path = fresh_path("add");
    Store db(path, Store::Mode::read_write);
    const SweepId sweep = db.open_sweep(sweep_record(), false).id;
    int next = 0;
    for (auto _ : state) {
        std::vector<NewTrial> batch;
        for (int k = 0; k < 1000; ++k, ++next)
            batch.push_back({config(next), TrialStatus::pending, "", estimate(next), 0, {}});
        db.add_trials(sweep, batch);
    }
    state.SetItemsProcessed(state.iterations() * 1000);
}
BENCHMARK(BM_AddTrials)->Iterations(20)->UseRealTime()->Unit(benchmark::kMillisecond);

void BM_FindBest10k(benchmark::State& state) {
    const std::string path = fresh_path("best");
    {
        Store db(path, Store::Mode::read_write);
        const SweepId sweep = populate(db, 10000);
        int i = 0;
        while (auto claimed = db.claim_next_pending(sweep))
            db.record_result(claimed->id, result(claimed->config, i++), "", now_timestamp(), now_timestamp());
    }
    const Store reader = Store::open_reader(path);
    BestQuery query;
    query.max_memory = 60000;
    for (auto _ : state) benchmark::DoNotOptimize(find_best(reader, query));
}
BENCHMARK(BM_FindBest10k)->UseRealTime()->Unit(benchmark::kMillisecond);

// The front of 10,000 measured trials whose throughput grows with memory (the
// realistic, hard case: many trials near the front). Schema 2's pairwise view
// took 5.5 s on this shape; the window-function view of schema 3 is O(n log n).
void BM_ParetoFront10k(benchmark::State& state) {
    const std::string path = fresh_path("front");
    SweepId sweep{};
    {
        Store db(path, Store::Mode::read_write);
        sweep = populate(db, 10000);
        int i = 0;
        while (auto claimed = db.claim_next_pending(sweep)) {
            TrialResult r = result(claimed->config, i);
            r.memory.peak = 1000000 + static_cast<std::uint64_t>((i * 7919) % 10007) * 1000;
            r.tokens_per_s = static_cast<double>(r.memory.peak) / 100.0 * (1.0 + 0.05 * ((i * 104729) % 101) / 100.0);
            db.record_result(claimed->id, r, "", now_timestamp(), now_timestamp());
            ++i;
        }
    }
    const Store reader = Store::open_reader(path);
    std::size_t front = 0;
    for (auto _ : state) benchmark::DoNotOptimize(front = reader.pareto_front(sweep).size());
    state.counters["front"] = static_cast<double>(front);
}
BENCHMARK(BM_ParetoFront10k)->UseRealTime()->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
