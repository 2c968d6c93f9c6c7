// Report rendering over a 10,000-trial sweep: loading it from the store,
// rendering the HTML page, the whole `tune report` path (load + render +
// write), and the text report. The database is built once per run (through
// the Store API, a few seconds) in the system temp directory; the page it
// renders is also left at <build>/bench/report-10k.html for
// scripts/report-timings.sh to open in Chromium.
#include <benchmark/benchmark.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>

#include <fmt/format.h>

#include "reports/html_report.h"
#include "reports/sweep_data.h"
#include "reports/text_report.h"
#include "store/store.h"
#include "tests/support/report_fixture.h"

namespace {

using namespace tune;

constexpr std::size_t kTrials = 10'000;

// The 10,000-trial database, made on first use and removed at exit.
class BigSweep {
public:
    BigSweep()
        : path_(
              (std::filesystem::temp_directory_path() / fmt::format("tune-bench-report-{}.db", ::getpid())).string()) {
        remove();
        Store db(path_, Store::Mode::read_write);
        test::FixtureSweep f;
        f.name = "big";
        f.big_space = true;
        f.max_trials = kTrials;
        test::add_fixture_sweep(db, f);
    }
    ~BigSweep() { remove(); }
    BigSweep(const BigSweep&) = delete;
    BigSweep& operator=(const BigSweep&) = delete;

    const std::string& path() const { return path_; }

private:
    void remove() {
        for (const char* suffix : {"", "-wal", "-shm"}) std::filesystem::remove(path_ + suffix);
    }
    std::string path_;
};

const BigSweep& big_sweep() {
    static const BigSweep sweep;
    return sweep;
}

const std::vector<std::string> kNames{"big"};

void BM_LoadSweep(benchmark::State& state) {
    const Store db(big_sweep().path(), Store::Mode::read_only);
    for (auto _ : state) benchmark::DoNotOptimize(load_sweeps(db, kNames));
    state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations() * kTrials));
}
BENCHMARK(BM_LoadSweep)->Unit(benchmark::kMillisecond);

void BM_RenderHtml(benchmark::State& state) {
    const Store db(big_sweep().path(), Store::Mode::read_only);
    const auto data = load_sweeps(db, kNames);
    std::size_t bytes = 0;
    for (auto _ : state) {
        const std::string page = render_html_report(data);
        bytes = page.size();
        benchmark::DoNotOptimize(page.data());
    }
    state.counters["page_MiB"] = static_cast<double>(bytes) / (1 << 20);
}
BENCHMARK(BM_RenderHtml)->Unit(benchmark::kMillisecond);

// What `tune report --db big.db -o report.html` does, end to end.
void BM_WriteHtmlReport(benchmark::State& state) {
    const Store db(big_sweep().path(), Store::Mode::read_only);
    // Beside the benchmark binary (<build>/bench/).
    const auto out = std::filesystem::read_symlink("/proc/self/exe").parent_path() / "report-10k.html";
    for (auto _ : state) write_html_report(db, kNames, out);
}
BENCHMARK(BM_WriteHtmlReport)->Unit(benchmark::kMillisecond);

void BM_TextReport(benchmark::State& state) {
    const Store db(big_sweep().path(), Store::Mode::read_only);
    for (auto _ : state) benchmark::DoNotOptimize(text_report(db, kNames));
}
BENCHMARK(BM_TextReport)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
