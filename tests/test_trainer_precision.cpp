// Precisions: fp16 dynamic loss scaling grows after a window of good steps,
// backs off on overflow and skips that step (reported); pure bf16 keeps
// weights, gradients and optimizer states in bf16; mixed precision keeps
// fp32 master weights beside 16-bit weights.
#include <catch2/catch.hpp>

#include "support/trainer_fixture.h"
#include "train/trial.h"

using namespace tune;

TEST_CASE("fp16 loss scale grows after each window of good steps", "[trainer][fp16]") {
    TrialConfig c = test::trainer_config(*find_model("tiny"), Optimizer::adamw, Precision::fp16_mixed);
    c.loss_scale_init = 1024;
    c.loss_scale_window = 2;
    c.steps = 5;
    train::TrialDetails d;
    const TrialResult r = train::run_trial(c, test::quiet_trial(), &d);
    REQUIRE(r.status == TrialStatus::ok);
    CHECK(d.loss_scales == std::vector<float>{1024, 1024, 2048, 2048, 4096});
    CHECK(d.skipped == std::vector<bool>(5, false));
}

TEST_CASE("fp16 overflow skips the step, leaves the weights alone and halves the scale", "[trainer][fp16]") {
    TrialConfig c = test::trainer_config(*find_model("tiny"), Optimizer::adamw, Precision::fp16_mixed);
    c.loss_scale_init = 1099511627776.0;  // 2^40: the scaled gradients overflow fp16
    test::TrainerRig rig(c, train::synthetic_tokens(c.seed, c.model.vocab));
    train::Trainer& t = *rig.trainer;
    const train::HostParams before = t.model().download_weights();
    const train::StepStats s = t.step();
    CHECK(s.skipped);
    CHECK(s.loss_scale == 1099511627776.0f);
    CHECK(t.loss_scale() == 549755813888.0f);
    CHECK(t.applied_steps() == 0);
    CHECK(std::isfinite(s.loss));
    const train::HostParams after = t.model().download_weights();
    for (std::size_t i = 0; i < before.size(); ++i) CHECK(before[i] == after[i]);

    // The scale backs off until the gradients fit, then steps apply.
    int applied_at = -1;
    for (int step = 1; step < 40 && applied_at < 0; ++step)
        if (!t.step().skipped) applied_at = step;
    CHECK(applied_at > 0);
    CHECK(t.applied_steps() == 1);
    CHECK(t.loss_scale() <= 65536.0f * 2);
}

TEST_CASE("a trial reports fp16 skipped steps and still ends ok", "[trainer][fp16]") {
    TrialConfig c = test::trainer_config(*find_model("tiny"), Optimizer::adamw, Precision::fp16_mixed);
    c.loss_scale_init = 1099511627776.0;
    c.steps = 2;
    train::TrialDetails d;
    const TrialResult r = train::run_trial(c, test::quiet_trial(), &d);
    REQUIRE(r.status == TrialStatus::ok);
    CHECK(d.skipped == std::vector<bool>{true, true});
    CHECK_THAT(r.reason, Catch::Contains("2 of 2 steps skipped"));
}

TEST_CASE("pure bf16 keeps weights, gradients and states in bf16, mixed keeps fp32 master", "[trainer][bf16]") {
    const TrialConfig base = test::trainer_config(*find_model("tiny"));
    const train::ParamLayout layout = train::make_param_layout(base.model, 1, base.adam8bit_block);
    const auto padded = static_cast<std::uint64_t>(layout.padded_total());

    TrialConfig pure = base;
    pure.precision = Precision::bf16;
    test::TrainerRig p(pure, train::synthetic_tokens(pure.seed, pure.model.vocab));
    CHECK(p.trainer->model().plan().state == kernels::DType::bf16);
    CHECK(p.trainer->memory().live(Component::params) == 2 * padded);
    CHECK(p.trainer->memory().live(Component::grads) == 2 * padded);
    CHECK(p.trainer->memory().live(Component::optim) == 2 * 2 * padded);  // m and v, 2 bytes each
    CHECK(p.trainer->memory().live(Component::master) == 0);
    const train::StepStats s = p.trainer->step();
    CHECK(std::isfinite(s.loss));

    TrialConfig mixed = base;
    mixed.precision = Precision::bf16_mixed;
    test::TrainerRig m(mixed, train::synthetic_tokens(mixed.seed, mixed.model.vocab));
    CHECK(m.trainer->memory().live(Component::params) == 2 * padded);
    CHECK(m.trainer->memory().live(Component::master) == 4 * padded);
    CHECK(m.trainer->memory().live(Component::optim) == 2 * 4 * padded);
}

TEST_CASE("every optimizer trains the tiny model in every precision", "[trainer][optimizers]") {
    for (Optimizer o : kOptimizers) {
        for (Precision p : kPrecisions) {
            TrialConfig c = test::trainer_config(*find_model("tiny"), o, p);
            c.steps = 3;
            c.lr = 1e-3;
            const TrialResult r = train::run_trial(c, test::quiet_trial());
            INFO(summary(c) << ": " << r.reason);
            REQUIRE(r.status == TrialStatus::ok);
            CHECK(r.losses.size() == 3);
            for (double l : r.losses) CHECK(std::isfinite(l));
        }
    }
}
