// A trial's wall time: the fixed part (start-up, set-up) from a prior, then
// learned from finished trials as their wall time less their steps; the
// makespan of what is left follows it.
#include <catch2/catch.hpp>

#include <vector>

#include "driver/makespan.h"
#include "driver/trial_cost.h"
#include "sweep/spec.h"

using namespace tune;

namespace {

SweepSpec two_rank_cpu_sweep() {
    return parse_sweep(
        "name = \"c\"\n[model]\npreset = \"tiny\"\n[hardware]\ndevice = \"cpu\"\ngpus = 2\n"
        "[space]\ncontext = [64]\n[trial]\nsteps = 4\nwarmup = 2\n",
        "c.toml");
}

TrialResult ran(std::vector<double> step_ms) {
    TrialResult r;
    r.status = TrialStatus::ok;
    r.step_ms = std::move(step_ms);
    return r;
}

}  // namespace

TEST_CASE("a trial's fixed cost starts at the prior and becomes the median of what trials showed", "[makespan]") {
    TrialCost cost(two_rank_cpu_sweep());
    const double prior = cost.fixed_s();
    CHECK(prior == Approx(0.45));  // CPU start-up and one more rank
    Estimate e;
    e.step_s = 0.01;
    CHECK(cost.trial_s(e) == Approx(prior + 4 * 0.01));  // every step, warmup included
    cost.observe(1.0, ran({100, 100, 100, 100}));        // 0.6 s outside its steps
    cost.observe(2.0, ran({100, 100, 100, 100}));        // 1.6 s
    cost.observe(0.9, ran({100, 100, 100, 100}));        // 0.5 s
    cost.observe(5.0, ran({}));                          // no steps (an oom before the first): not counted
    CHECK(cost.observations() == 3);
    CHECK(cost.fixed_s() == Approx(0.6));
    CHECK(cost.trial_s(e) == Approx(0.6 + 0.04));
}

TEST_CASE("what is left of a sweep is packed at the learned cost", "[makespan]") {
    const SweepSpec spec = two_rank_cpu_sweep();
    std::vector<NewTrial> pending(4);
    for (std::size_t i = 0; i < pending.size(); ++i) {
        pending[i].estimate = Estimate{};
        pending[i].estimate->step_s = 0.25;  // 1 s of steps each
        pending[i].priority = static_cast<double>(i);
    }
    TrialCost cost(spec);
    cost.observe(3.0, ran({250, 250, 250, 250}));  // 2 s outside the steps
    CHECK(predict_makespan(pending, cost, 1, 1).makespan_s == Approx(4 * 3.0));
    CHECK(predict_makespan(pending, cost, 2, 1).makespan_s == Approx(2 * 3.0));
    CHECK(predict_makespan(pending, spec, 1, 1).makespan_s == Approx(4 * (0.45 + 1.0)));  // the prior
}
