// The machine's pace beside every estimate and trial: the speed reference
// (kernels/speed_reference.h) taken with the probes and before each step, the
// slowdown between them (core/machine_speed.h), and what uses it: the probes'
// record, the trial's JSON result, the store (schemas 8 and 9: the pace
// exponent calibration learned), calibration and the
// accuracy reports, which give the step-time error at each trial's speed.
#include <catch2/catch.hpp>

#include <cmath>

#include <nlohmann/json.hpp>

#include "core/machine_speed.h"
#include "core/presets.h"
#include "core/step_statistics.h"
#include "driver/calibration.h"
#include "estimate/estimate.h"
#include "kernels/cpu/cpu_backend.h"
#include "kernels/speed_reference.h"
#include "probe/probes.h"
#include "reports/accuracy.h"
#include "reports/html_report.h"
#include "reports/sweep_data.h"
#include "reports/text_report.h"
#include "store/record_json.h"
#include "store/store.h"
#include "test_store_support.h"

using namespace tune;

namespace {

constexpr double kProbedReference = 0.002;  // seconds: the probes' speed reference

// Three trials estimated at 1, 2 and 4 s with the probes' reference; each ran on a
// machine `slowdown` times slower than at probe time (its reference that many times the
// probes'), with an estimate expecting its step to follow at `exponent`, and its step
// took `step_over_estimate` times the estimate.
void add_slowed_sweep(Store& db, const std::string& name, double slowdown, double step_over_estimate,
                      double exponent = 1) {
    const SweepId sweep = db.open_sweep(test::sample_sweep(name), false).id;
    std::vector<NewTrial> enumerated;
    for (int i = 0; i < 3; ++i) {
        Estimate e = test::sample_estimate(i);
        e.step_s = static_cast<double>(1 << i);
        e.speed_reference_s = kProbedReference;
        enumerated.push_back({test::sample_config(i), TrialStatus::pending, "", e, static_cast<double>(i), {}});
    }
    db.add_trials(sweep, enumerated);
    while (auto claimed = db.claim_next_pending(sweep, ClaimOrder::priority)) {
        TrialResult r = test::sample_result(claimed->config, 0);
        r.estimate = claimed->estimate;
        r.estimate->speed_reference_s = kProbedReference;
        r.estimate->pace_exponent = exponent;
        r.speed_reference_s = slowdown * kProbedReference;
        r.step_ms.assign(claimed->config.steps, claimed->estimate->step_s * step_over_estimate * 1000);
        db.record_result(claimed->id, r, "", now_timestamp(), now_timestamp());
    }
}

}  // namespace

TEST_CASE("the slowdown is the trial's speed reference over the probes', 1 when either is unknown", "[machine-speed]") {
    CHECK(machine_slowdown(0.003, 0.002) == Approx(1.5));
    CHECK(machine_slowdown(0.001, 0.002) == Approx(0.5));
    CHECK(machine_slowdown(0.0, 0.002) == 1.0);  // a trial from before the reference
    CHECK(machine_slowdown(0.003, 0.0) == 1.0);  // a nominal estimate: no probes
    CHECK(machine_slowdown(std::nan(""), 0.002) == 1.0);
    TrialResult r;
    r.speed_reference_s = 0.004;
    CHECK(machine_slowdown(r) == 1.0);  // no estimate
    r.estimate = Estimate{};
    r.estimate->speed_reference_s = 0.002;
    CHECK(machine_slowdown(r) == Approx(2.0));
}

TEST_CASE("the pace factor is the slowdown to the estimate's exponent", "[machine-speed]") {
    CHECK(pace_factor(4.0, 1.0) == Approx(4.0));
    CHECK(pace_factor(4.0, 0.5) == Approx(2.0));
    CHECK(pace_factor(0.25, 0.5) == Approx(0.5));  // a faster machine: the step shrinks less than the reference
    CHECK(pace_factor(3.0, 0.0) == 1.0);           // a step the pace does not move
    TrialResult r;
    r.speed_reference_s = 0.008;
    CHECK(pace_factor(r) == 1.0);  // no estimate
    r.estimate = Estimate{};
    r.estimate->speed_reference_s = 0.002;
    CHECK(pace_factor(r) == Approx(4.0));  // the prior exponent, 1
    r.estimate->pace_exponent = 0.5;
    CHECK(pace_factor(r) == Approx(2.0));
    const nlohmann::json j = r;
    CHECK(j.at("estimate").at("time").at("pace_exponent") == Approx(0.5));
    CHECK(j.get<TrialResult>().estimate->pace_exponent == 0.5);
    r.estimate->pace_exponent = 1;
    CHECK_FALSE(nlohmann::json(r).at("estimate").at("time").contains("pace_exponent"));
}

TEST_CASE("speed references round-trip through the result JSON and are absent when unknown", "[machine-speed]") {
    TrialResult r;
    r.status = TrialStatus::ok;
    r.speed_reference_s = 0.0031;
    r.estimate = Estimate{};
    r.estimate->speed_reference_s = 0.0025;
    const nlohmann::json j = r;
    CHECK(j.at("speed_reference_s") == Approx(0.0031));
    CHECK(j.at("estimate").at("time").at("speed_reference_s") == Approx(0.0025));
    const TrialResult back = j.get<TrialResult>();
    CHECK(back.speed_reference_s == r.speed_reference_s);
    CHECK(back.estimate->speed_reference_s == r.estimate->speed_reference_s);

    const nlohmann::json bare = TrialResult{};
    CHECK_FALSE(bare.contains("speed_reference_s"));
    const nlohmann::json nominal = Estimate{};
    CHECK_FALSE(nominal.at("time").contains("speed_reference_s"));
}

TEST_CASE("the speed reference runs on the backend and gives back what it allocated", "[machine-speed][kernels]") {
    kernels::CpuBackend backend({1, 0});
    const double first = kernels::time_speed_reference(backend);
    const double second = kernels::time_speed_reference(backend);
    CHECK(first > 0);
    CHECK(second > 0);
    CHECK(backend.live_bytes() == 0);
    // Under a memory limit that has room for its three (n, n) fp32 buffers only, it still runs.
    const std::uint64_t n = kernels::SpeedReference::kSize;
    kernels::CpuBackend limited({1, 3 * n * n * 4 + 4096});
    CHECK(kernels::time_speed_reference(limited) > 0);
    CHECK(limited.live_bytes() == 0);
}

TEST_CASE("a probe set carries its speed reference, and estimates priced from it say so", "[machine-speed][probe]") {
    TrialConfig c;
    c.model = *find_model("tiny");
    c.micro_batch = 2, c.context = 64;
    const ProbedRates plan = probe::plan_probes(c.model, {c});
    CHECK(plan.speed_reference_s > 0);  // asked for, so a cache without it is probed again
    const auto planned = probe::records_of(plan);
    CHECK(std::any_of(planned.begin(), planned.end(),
                      [](const probe::ProbeRecord& r) { return r.name.rfind("speed-reference", 0) == 0; }));

    kernels::CpuBackend backend({1, 0});
    probe::ProbeSettings settings;
    settings.min_seconds = 0.001;
    std::vector<probe::ProbeRecord> records;
    const ProbedRates rates = probe::run_probes(backend, plan, settings, &records);
    CHECK(rates.speed_reference_s > 0);
    CHECK(rates.speed_reference_s != plan.speed_reference_s);
    CHECK(probe::rates_of(records).speed_reference_s == rates.speed_reference_s);

    EstimateOptions o;
    o.probed = std::make_shared<const ProbedRates>(rates);
    CHECK(estimate(c, *find_device("cpu"), o).speed_reference_s == rates.speed_reference_s);
    CHECK(estimate(c, *find_device("cpu"), EstimateOptions{}).speed_reference_s == 0);
}

TEST_CASE("what calibration learns scales the whole probed step, the optimizer's update included",
          "[machine-speed][calibration][probe]") {
    TrialConfig c;
    c.model = *find_model("tiny");
    c.micro_batch = 2, c.context = 64;
    kernels::CpuBackend backend({1, 0});
    probe::ProbeSettings settings;
    settings.min_seconds = 0.001;
    EstimateOptions base;
    base.probed = std::make_shared<const ProbedRates>(
        probe::run_probes(backend, probe::plan_probes(c.model, {c}), settings, nullptr));
    const Hardware cpu = *find_device("cpu");
    const Estimate before = estimate(c, cpu, base);
    REQUIRE(base.probed->optimizer_seconds_per_element(c.model, c));  // the update is a probed term
    // Every trial's step took twice its estimate, at the probes' pace.
    Calibration cal(base);
    TrialResult r;
    r.status = TrialStatus::ok;
    r.config = c;
    r.estimate = before;
    r.memory.peak = before.memory.peak;
    r.step_ms.assign(c.steps, 2 * before.step_s * 1e3);
    r.step_stats = step_statistics(r.step_ms, c.warmup);
    cal.observe(r, before);
    CHECK(estimate(c, cpu, cal.options()).step_s == Approx(2 * before.step_s));
}

TEST_CASE("calibration learns the estimator's error, not the host's pace", "[machine-speed][calibration]") {
    TrialConfig c;
    c.model = *find_model("small");
    c.context = 256, c.micro_batch = 2;
    Estimate uncalibrated = estimate(c, *find_device("cpu"));
    uncalibrated.speed_reference_s = kProbedReference;
    TrialResult r;
    r.status = TrialStatus::ok;
    r.config = c;
    r.estimate = uncalibrated;
    r.memory.peak = uncalibrated.memory.peak;
    // The machine ran at half the probes' speed and the step took twice the estimate.
    r.speed_reference_s = 2 * kProbedReference;
    r.tokens_per_s = uncalibrated.tokens_per_s / 2;
    Calibration paced(EstimateOptions{});
    paced.observe(r, uncalibrated);
    CHECK(paced.efficiency_factor() == Approx(1.0));
    // Without the trial's reference the same measurement reads as a 2x slower estimator.
    r.speed_reference_s = 0;
    Calibration unpaced(EstimateOptions{});
    unpaced.observe(r, uncalibrated);
    CHECK(unpaced.efficiency_factor() == Approx(0.5));
}

TEST_CASE("the store keeps both speed references and the reports give the error at each trial's speed",
          "[machine-speed][store][report]") {
    test::ScratchDir dir;
    // 1.5x slower than at probe time, the step 1.5 x 1.1 x the estimate: 65% over raw, 10% at its own speed.
    const Store db = test::written_then_read_only(dir, [](Store& w) { add_slowed_sweep(w, "slowed", 1.5, 1.5 * 1.1); });
    const auto trials = db.trials({std::nullopt, TrialStatus::ok, false, false});
    REQUIRE(trials.size() == 3);
    for (const TrialRecord& t : trials) {
        CHECK(t.result.speed_reference_s == Approx(1.5 * kProbedReference));
        REQUIRE(t.result.estimate);
        CHECK(t.result.estimate->speed_reference_s == Approx(kProbedReference));
    }
    const Accuracy a = estimator_accuracy(load_sweep_data(db, "slowed"));
    CHECK(a.step_before_calibration_summary.median_abs_pct == Approx(100.0 * (1 - 1 / 1.65)));
    REQUIRE(a.step_before_calibration_at_trial_speed_summary.count == 3);
    CHECK(a.step_before_calibration_at_trial_speed_summary.median_abs_pct == Approx(100.0 * (1 - 1 / 1.1)));
    CHECK(a.step_at_trial_speed_summary.median_abs_pct == Approx(100.0 * (1 - 1 / 1.1)));
    REQUIRE(a.slowdowns.size() == 3);
    CHECK(a.slowdowns[0] == Approx(1.5));

    const std::string medians = step_error_medians_text(a);
    CHECK_THAT(medians, Catch::Contains("At each trial's machine speed"));
    CHECK_THAT(medians, Catch::Contains("1.50x to 1.50x"));
    CHECK_THAT(medians, Catch::Contains("9.1% before calibration"));
    CHECK_THAT(medians, !Catch::Contains("to the power"));  // nothing learned: the prior
    const std::vector<std::string> names{"slowed"};
    const std::string html = html_report(db, names);
    CHECK_THAT(html, Catch::Contains("step time, before calibration, at the trial"));
    CHECK_THAT(html, Catch::Contains("step time, after calibration, at the trial"));
    CHECK_THAT(text_report(db, names), Catch::Contains("step time, before calibration, at trial speed"));
}

TEST_CASE("the store keeps the pace exponent the estimate ran with, and the reports judge at it",
          "[machine-speed][store][report]") {
    // Each trial ran on a machine whose reference took 4x the probes'; calibration had
    // learned that a step slows as its square root, and the step took 2 x 1.1 x the estimate.
    test::ScratchDir dir;
    const Store db =
        test::written_then_read_only(dir, [](Store& w) { add_slowed_sweep(w, "learned", 4.0, 2 * 1.1, 0.5); });
    const auto trials = db.trials({std::nullopt, TrialStatus::ok, false, false});
    REQUIRE(trials.size() == 3);
    for (const TrialRecord& t : trials) {
        CHECK(t.result.estimate->pace_exponent == Approx(0.5));
        CHECK(record_json(t).at("estimate").at("pace_exponent") == Approx(0.5));  // tune export --format json
    }
    const Accuracy a = estimator_accuracy(load_sweep_data(db, "learned"));
    CHECK(a.pace_exponent == Approx(0.5));
    // After calibration at its exponent: 10% slow. Before, at the prior 1: 4 / 2.2 of the step.
    CHECK(a.step_at_trial_speed_summary.median_abs_pct == Approx(100.0 * (1 - 1 / 1.1)));
    CHECK(a.step_before_calibration_at_trial_speed_summary.median_abs_pct == Approx(100.0 * (4 / 2.2 - 1)));
    CHECK_THAT(step_error_medians_text(a), Catch::Contains("to the power 0.50"));
}

TEST_CASE("the reports name the pace exponent of the trial that started last, not of the last enumerated",
          "[machine-speed][report]") {
    test::ScratchDir dir;
    const Store db = test::written_then_read_only(dir, [](Store& w) {
        const SweepId sweep = w.open_sweep(test::sample_sweep("order"), false).id;
        std::vector<NewTrial> enumerated;
        for (int i = 0; i < 2; ++i) {
            Estimate e = test::sample_estimate(i);
            e.speed_reference_s = kProbedReference;
            e.pace_exponent = i == 0 ? 0.4 : 0.8;
            // The second enumerated runs first (priority 0), the first last, with what was learned by then.
            enumerated.push_back({test::sample_config(i), TrialStatus::pending, "", e, i == 0 ? 1.0 : 0.0, {}});
        }
        w.add_trials(sweep, enumerated);
        const Timestamp start = now_timestamp();
        for (int k = 0; auto claimed = w.claim_next_pending(sweep, ClaimOrder::priority); ++k) {
            TrialResult r = test::sample_result(claimed->config, 0);
            r.estimate = claimed->estimate;
            r.speed_reference_s = kProbedReference;
            r.step_ms.assign(claimed->config.steps, 1000.0);
            const Timestamp began = start + std::chrono::seconds(10 * k);
            w.record_result(claimed->id, r, "", began, began + std::chrono::seconds(5));
        }
    });
    CHECK(estimator_accuracy(load_sweep_data(db, "order")).pace_exponent == Approx(0.4));
}

TEST_CASE("a pending trial's estimate keeps its machine speed and pace exponent through re-estimation and claim",
          "[machine-speed][store]") {
    test::ScratchDir dir;
    Store db(dir.file("t.db"), Store::Mode::read_write);
    const SweepId sweep = db.open_sweep(test::sample_sweep("pending"), false).id;
    Estimate e = test::sample_estimate(0);
    e.speed_reference_s = kProbedReference;
    e.pace_exponent = 0.7;
    db.add_trials(sweep, std::vector<NewTrial>{{test::sample_config(0), TrialStatus::pending, "", e, 0, {}},
                                               {test::sample_config(1), TrialStatus::pending, "", e, 1, {}}});
    // Calibration learned more: the driver re-estimates the pending trials (driver/plan.cpp).
    const auto pending = db.trials({sweep, TrialStatus::pending, false, false});
    REQUIRE(pending.size() == 2);
    e.pace_exponent = 0.6;
    db.update_pending(std::vector<PendingUpdate>{{pending[1].id, e, 1, TrialStatus::pending, "", {}}});
    auto first = db.claim_next_pending(sweep, ClaimOrder::priority);
    auto second = db.claim_next_pending(sweep, ClaimOrder::priority);
    REQUIRE(first);
    REQUIRE(second);
    CHECK(first->estimate->pace_exponent == Approx(0.7));
    CHECK(first->estimate->speed_reference_s == Approx(kProbedReference));
    CHECK(second->estimate->pace_exponent == Approx(0.6));  // the trial runs with, and is judged at, this one
    CHECK(second->estimate->speed_reference_s == Approx(kProbedReference));
}

TEST_CASE("a sweep without speed references reports the raw step error alone", "[machine-speed][report]") {
    test::ScratchDir dir;
    Store db(dir.file("t.db"), Store::Mode::read_write);
    const SweepId sweep = db.open_sweep(test::sample_sweep("plain"), false).id;
    Estimate e = test::sample_estimate(0);
    e.step_s = 1.0;
    db.add_trials(sweep, std::vector<NewTrial>{{test::sample_config(0), TrialStatus::pending, "", e, 0, {}}});
    auto claimed = db.claim_next_pending(sweep, ClaimOrder::priority);
    REQUIRE(claimed);
    TrialResult r = test::sample_result(claimed->config, 0);
    r.estimate = claimed->estimate;
    r.step_ms.assign(claimed->config.steps, 1500.0);
    db.record_result(claimed->id, r, "", now_timestamp(), now_timestamp());
    const Accuracy a = estimator_accuracy(load_sweep_data(db, "plain"));
    CHECK(a.step_summary.count == 1);
    CHECK(a.step_at_trial_speed_summary.count == 0);
    CHECK(a.slowdowns.empty());
    CHECK_THAT(step_error_medians_text(a), !Catch::Contains("machine speed"));
}
