// LOMO: the update equals plain SGD applied to the gradients after backward,
// each gradient exists alone (never more than one full tensor), and
// accumulation is an invalid combination, reported with the reason.
#include <catch2/catch.hpp>

#include "support/trainer_fixture.h"
#include "train/trial.h"

using namespace tune;

TEST_CASE("lomo equals SGD applied after backward", "[trainer][lomo]") {
    TrialConfig c = test::trainer_config(*find_model("tiny"), Optimizer::lomo);
    c.lr = 0.05;
    c.weight_decay = 0.1;
    TrialConfig reference = c;
    reference.optimizer = Optimizer::adamw;  // only to get the gradients
    test::TrainerRig sgd(reference, train::synthetic_tokens(c.seed, c.model.vocab));
    test::TrainerRig lomo(c, train::synthetic_tokens(c.seed, c.model.vocab));
    const double loss = sgd.trainer->compute_gradients();
    const train::HostParams w = sgd.trainer->model().download_weights();
    const train::HostParams g = sgd.trainer->model().download_grads();
    CHECK(lomo.trainer->step().loss == Approx(loss).epsilon(1e-6));
    const train::HostParams after = lomo.trainer->model().download_weights();

    const train::ParamLayout& layout = lomo.trainer->layout();
    double worst = 0;
    for (std::size_t b = 0; b < layout.buffers(); ++b)
        for (const train::TensorView& t : layout.flat(b).tensors)
            for (std::int64_t e = t.offset; e < t.offset + t.numel(); ++e) {
                const auto i = static_cast<std::size_t>(e);
                const double decay = t.matrix() ? 1.0 - c.lr * c.weight_decay : 1.0;
                const double want = w[b][i] * decay - c.lr * g[b][i];
                worst = std::max(worst, std::abs(want - after[b][i]));
            }
    CHECK(worst <= 1e-6);
}

TEST_CASE("lomo never holds more than one full gradient tensor", "[trainer][lomo]") {
    for (double clip : {0.0, 1.0}) {
        TrialConfig c = test::trainer_config(*find_model("tiny"), Optimizer::lomo, Precision::bf16_mixed);
        c.clip = clip;
        test::TrainerRig rig(c, train::synthetic_tokens(c.seed, c.model.vocab));
        CHECK(rig.trainer->memory().live(Component::grads) == 0);
        rig.trainer->step();
        const ModelSpec& m = c.model;
        const std::uint64_t largest = 2 * std::max({m.vocab * m.hidden, m.ffn * m.hidden, m.hidden * m.hidden});
        CHECK(rig.trainer->memory().tag_peak(Component::grads) == largest);
        CHECK(rig.trainer->memory().live(Component::grads) == 0);
        CHECK(rig.trainer->memory().live(Component::optim) == 0);
    }
}

TEST_CASE("lomo with grad_accum > 1 is invalid, with the reason", "[trainer][lomo]") {
    TrialConfig c = test::trainer_config(*find_model("tiny"), Optimizer::lomo);
    c.grad_accum = 2;
    const TrialResult r = train::run_trial(c, test::quiet_trial());
    CHECK(r.status == TrialStatus::invalid);
    CHECK_THAT(r.reason, Catch::Contains("grad_accum"));
    CHECK(r.losses.empty());
}

TEST_CASE("lomo in fp16 finds overflow in its norm pass and skips the step", "[trainer][lomo][fp16]") {
    TrialConfig c = test::trainer_config(*find_model("tiny"), Optimizer::lomo, Precision::fp16_mixed);
    c.loss_scale_init = 1099511627776.0;  // 2^40: the scaled gradients overflow fp16
    test::TrainerRig rig(c, train::synthetic_tokens(c.seed, c.model.vocab));
    const train::HostParams before = rig.trainer->model().download_weights();
    const train::StepStats s = rig.trainer->step();
    CHECK(s.skipped);
    CHECK(rig.trainer->loss_scale() == 549755813888.0f);
    const train::HostParams after = rig.trainer->model().download_weights();
    for (std::size_t i = 0; i < before.size(); ++i) CHECK(before[i] == after[i]);
    CHECK(rig.trainer->memory().live(Component::grads) == 0);
}
