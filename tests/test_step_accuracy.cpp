// The step-time accuracy before and after calibration: the store keeps each
// trial's uncalibrated estimate (schema 7) beside the calibrated one the sweep
// ran it with, and the reports show both medians.
#include <catch2/catch.hpp>

#include "reports/accuracy.h"
#include "reports/html_report.h"
#include "reports/sweep_data.h"
#include "reports/text_report.h"
#include "store/store.h"
#include "test_store_support.h"

using namespace tune;

namespace {

// Three ok trials enumerated with step estimates 1.0, 2.0, 4.0 s, re-estimated (as a
// calibration would) to 1.2x those, then measured at 1.25x: before calibration each is
// 20% under, after 4% under.
void add_calibrated_sweep(Store& db, const std::string& name) {
    const SweepId sweep = db.open_sweep(test::sample_sweep(name), false).id;
    std::vector<NewTrial> enumerated;
    for (int i = 0; i < 3; ++i) {
        Estimate e = test::sample_estimate(i);
        e.step_s = static_cast<double>(1 << i);
        enumerated.push_back({test::sample_config(i), TrialStatus::pending, "", e, static_cast<double>(i), {}});
    }
    db.add_trials(sweep, enumerated);
    std::vector<PendingUpdate> calibrated;
    for (const TrialRecord& t : db.trials({sweep, TrialStatus::pending, false, false})) {
        PendingUpdate u;
        u.id = t.id;
        u.estimate = *t.result.estimate;
        u.estimate.step_s *= 1.2;
        u.priority = t.priority;
        calibrated.push_back(u);
    }
    db.update_pending(calibrated);
    while (auto claimed = db.claim_next_pending(sweep, ClaimOrder::priority)) {
        TrialResult r = test::sample_result(claimed->config, 0);
        r.estimate = claimed->estimate;
        const double measured_ms = claimed->estimate->step_s / 1.2 * 1.25 * 1000;
        r.step_ms.assign(claimed->config.steps, measured_ms);
        db.record_result(claimed->id, r, "", now_timestamp(), now_timestamp());
    }
}

}  // namespace

TEST_CASE("the store keeps the uncalibrated step estimate beside the calibrated one", "[store][accuracy]") {
    test::ScratchDir dir;
    Store db(dir.file("t.db"), Store::Mode::read_write);
    add_calibrated_sweep(db, "calibrated");
    const auto trials = db.trials({std::nullopt, TrialStatus::ok, false, false});
    REQUIRE(trials.size() == 3);
    for (const TrialRecord& t : trials) {
        REQUIRE(t.base_step_s);
        REQUIRE(t.result.estimate);
        CHECK(t.result.estimate->step_s == Approx(*t.base_step_s * 1.2));
        CHECK(*t.median_step_s == Approx(*t.base_step_s * 1.25));
    }
    // A trial enumerated without an estimate has none before calibration either.
    const SweepId other = db.open_sweep(test::sample_sweep("bare"), false).id;
    db.add_trials(other,
                  std::vector<NewTrial>{{test::sample_config(7), TrialStatus::pending, "", std::nullopt, 0, {}}});
    CHECK_FALSE(db.trials({other, std::nullopt, false, false}).at(0).base_step_s);
}

TEST_CASE("the accuracy summary and both reports give the median step error before and after calibration",
          "[report][accuracy]") {
    test::ScratchDir dir;
    const Store db = test::written_then_read_only(dir, [](Store& w) { add_calibrated_sweep(w, "calibrated"); });
    const Accuracy a = estimator_accuracy(load_sweep_data(db, "calibrated"));
    REQUIRE(a.step_before_calibration_summary.count == 3);
    REQUIRE(a.step_summary.count == 3);
    CHECK(a.step_before_calibration_summary.median_abs_pct == Approx(20.0));  // 1 / 1.25 - 1
    CHECK(a.step_summary.median_abs_pct == Approx(4.0));                      // 1.2 / 1.25 - 1

    const std::string medians = step_error_medians_text(a);
    CHECK(medians.find("20.0% before") != std::string::npos);
    CHECK(medians.find("4.0% after") != std::string::npos);

    const std::vector<std::string> names{"calibrated"};
    const std::string html = html_report(db, names);
    CHECK(html.find("step time, before calibration") != std::string::npos);
    CHECK(html.find("step time, after calibration") != std::string::npos);
    CHECK(html.find(medians) != std::string::npos);
    const std::string text = text_report(db, names);
    CHECK(text.find("step time, before calibration") != std::string::npos);
    CHECK(text.find("median |err|") != std::string::npos);
    CHECK(text.find(medians) != std::string::npos);
}

TEST_CASE("a sweep recorded before schema 7 reports the calibrated median alone", "[report][accuracy]") {
    Accuracy a;
    a.step_summary.count = 2;
    a.step_summary.median_abs_pct = 12.5;
    const std::string medians = step_error_medians_text(a);
    CHECK(medians.find("12.5% as calibrated") != std::string::npos);
    CHECK(medians.find("not kept") != std::string::npos);
    CHECK(step_error_medians_text(Accuracy{}).empty());
}
