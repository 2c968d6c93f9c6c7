// The numbers behind the report: funnel, estimator accuracy, dimension
// effects, sweep comparison and chart decimation, over the fixture database.
#include <catch2/catch.hpp>

#include <algorithm>

#include "core/config_error.h"
#include "reports/accuracy.h"
#include "reports/comparison.h"
#include "reports/dimension_effects.h"
#include "reports/funnel.h"
#include "reports/html_chart.h"
#include "reports/report_format.h"
#include "reports/sweep_data.h"
#include "store/store.h"
#include "tests/support/report_files.h"

using namespace tune;

namespace {

std::uint64_t stage(const std::vector<FunnelStage>& f, const std::string& name) {
    for (const auto& s : f)
        if (s.name == name) return s.count;
    FAIL("no funnel stage " << name);
    return 0;
}

}  // namespace

TEST_CASE("the funnel adds up to the sweep's statuses", "[report]") {
    SweepSummary s;
    s.counts[static_cast<std::size_t>(TrialStatus::ok)] = 5;
    s.counts[static_cast<std::size_t>(TrialStatus::oom)] = 2;
    s.counts[static_cast<std::size_t>(TrialStatus::failed)] = 1;
    s.counts[static_cast<std::size_t>(TrialStatus::timeout)] = 1;
    s.counts[static_cast<std::size_t>(TrialStatus::invalid)] = 3;
    s.counts[static_cast<std::size_t>(TrialStatus::pruned)] = 4;
    auto f = funnel(s);
    CHECK(stage(f, "enumerated") == 16);
    CHECK(stage(f, "invalid") == 3);
    CHECK(stage(f, "pruned") == 4);
    CHECK(stage(f, "run") == 9);
    CHECK(stage(f, "ok") == 5);
    CHECK(stage(f, "timeout") == 1);
    CHECK(std::none_of(f.begin(), f.end(), [](const auto& x) { return x.name == "not run yet"; }));
    s.counts[static_cast<std::size_t>(TrialStatus::pending)] = 7;
    CHECK(stage(funnel(s), "not run yet") == 7);
}

TEST_CASE("error summaries: bias, quantiles and the worst cases", "[report]") {
    std::vector<ErrorSample> samples;
    const double errors[] = {-20, -5, 0, 5, 10, 30};
    for (std::size_t i = 0; i < 6; ++i) samples.push_back({i, 100 + errors[i], 100, errors[i]});
    const ErrorSummary s = summarize(samples);
    CHECK(s.count == 6);
    CHECK(s.bias_pct == Approx(20.0 / 6));
    CHECK(s.mean_abs_pct == Approx(70.0 / 6));
    CHECK(s.median_abs_pct == Approx(7.5));
    CHECK(s.max_abs_pct == Approx(30));
    CHECK(s.within_10pct == 4);
    const auto w = worst(samples, 2);
    REQUIRE(w.size() == 2);
    CHECK(w[0].error_pct == 30);
    CHECK(w[1].error_pct == -20);
    CHECK(summarize({}).count == 0);
}

TEST_CASE("the fixture's sweep data, accuracy, effects and comparison", "[report]") {
    const auto dir = test::report_scratch_dir("analysis");
    const Store db(test::report_fixture_db(dir), Store::Mode::read_only);
    const SweepData h100 = load_sweep_data(db, "h100-demo");
    const SweepData a100 = load_sweep_data(db, "a100-demo");

    SECTION("loading") {
        CHECK(h100.trials.size() == h100.summary.total());
        CHECK(h100.memory_limit == (80ull << 30));
        REQUIRE(!h100.front.empty());
        CHECK(h100.front.size() == db.pareto_front(h100.summary.id).size());
        for (std::size_t k = 1; k < h100.front.size(); ++k) {
            const auto& prev = h100.trials[h100.front[k - 1]].result;
            const auto& next = h100.trials[h100.front[k]].result;
            CHECK(prev.memory.peak <= next.memory.peak);
            CHECK(prev.tokens_per_s < next.tokens_per_s);  // a front: more memory buys more throughput
        }
        CHECK_THROWS_AS(load_sweep_data(db, "no-such-sweep"), ConfigError);
    }
    SECTION("sweep names: the latest by default, duplicates dropped") {
        CHECK(resolve_sweep_names(db, {}) == std::vector<std::string>{"<script>alert(1)</script>"});
        const std::vector<std::string> asked{"a100-demo", "h100-demo", "a100-demo"};
        CHECK(resolve_sweep_names(db, asked) == std::vector<std::string>{"a100-demo", "h100-demo"});
    }
    SECTION("accuracy counts only ok trials with estimates") {
        const Accuracy a = estimator_accuracy(h100);
        CHECK(a.memory.size() == h100.summary.count(TrialStatus::ok));
        CHECK(a.memory_summary.max_abs_pct < 15.0);  // the fixture's noise is at most 12% per component
        std::size_t binned = 0;
        for (const auto& b : error_histogram(a)) binned += b.memory;
        CHECK(binned == a.memory.size());
    }
    SECTION("dimension effects cover every trial of every dimension") {
        for (const auto& d : dimension_effects(h100)) {
            std::size_t n = 0;
            for (const auto& v : d.values) n += v.trials;
            CHECK(n == h100.trials.size());
        }
        const ContextEffect e = context_effect(h100, *find_dimension("checkpointing"));
        CHECK(e.contexts == std::vector<std::uint32_t>{1024, 2048, 4096});
        REQUIRE(e.curves.size() == 2);
        CHECK(e.curves[0].label == "none");
        // Full checkpointing needs less memory than none at every context.
        for (std::size_t i = 0; i < e.contexts.size(); ++i)
            if (e.curves[0].min_peak[i] && e.curves[1].min_peak[i])
                CHECK(*e.curves[1].min_peak[i] < *e.curves[0].min_peak[i]);
    }
    SECTION("comparison matches by dimensions when the memory limit changes the hash") {
        const Comparison c = compare_sweeps(h100, a100);
        CHECK(c.matched.size() == h100.trials.size());
        CHECK(c.by_hash == 0);
        CHECK(c.by_dimensions == h100.trials.size());
        REQUIRE(c.tokens_delta_median_pct);
        CHECK(*c.tokens_delta_median_pct < -40.0);  // the A100 sweep runs at 0.42x
        const Comparison same = compare_sweeps(h100, h100);
        CHECK(same.by_hash == h100.trials.size());
        CHECK(*same.tokens_delta_median_pct == 0.0);
    }
    SECTION("decimated scatter points keep the front") {
        const auto few = plotted_trials(h100, 50);
        CHECK(few.size() <= 50 + h100.front.size());
        for (auto i : h100.front) CHECK(std::find(few.begin(), few.end(), i) != few.end());
        CHECK(plotted_trials(h100, 100000).size() == h100.summary.count(TrialStatus::ok));
    }
}
