// Recompute and accumulation change memory, not results: checkpointing none,
// selective and full give the same gradients (selective_op to fp32 rounding), and grad_accum k with
// micro-batch b gives the same gradients and update as one micro-batch k*b.
// NEFTune noise is seeded and reproducible.
#include <catch2/catch.hpp>

#include "support/trainer_fixture.h"

using namespace tune;

namespace {

train::HostParams gradients(const TrialConfig& c) {
    test::TrainerRig rig(c, train::synthetic_tokens(c.seed, c.model.vocab));
    rig.trainer->compute_gradients();
    return rig.trainer->model().download_grads();
}

double max_diff(const train::HostParams& a, const train::HostParams& b) {
    double most = 0;
    for (std::size_t i = 0; i < a.size(); ++i) most = std::max(most, test::max_abs_diff(a[i], b[i]));
    return most;
}

double max_value(const train::HostParams& a) {
    double most = 0;
    for (const auto& v : a) most = std::max(most, test::max_abs(v));
    return most;
}

}  // namespace

TEST_CASE("checkpointing none, selective, selective-op and full give the same gradients", "[trainer][checkpointing]") {
    for (const char* model : {"tiny", "tiny-variants"}) {
        for (Attention attention : kAttentions) {
            TrialConfig c = test::trainer_config(*find_model(model));
            c.context = 32;
            c.attention = attention;
            INFO(model << " " << to_string(attention));
            const train::HostParams none = gradients(c);
            REQUIRE(max_value(none) > 1e-3);
            // The recompute runs the same ops on the same inputs: identical results. But selective_op runs
            // the projections apart where the others fuse them (core/projection_fusion.h): the same sums in
            // another order, equal to fp32's rounding.
            for (Checkpointing mode : kCheckpointings) {
                c.checkpointing = mode;
                INFO(to_string(mode));
                if (mode == Checkpointing::selective_op)
                    CHECK(max_diff(none, gradients(c)) <= 1e-6 * max_value(none));
                else
                    CHECK(max_diff(none, gradients(c)) == 0.0);
            }
        }
    }
}

TEST_CASE("grad_accum k x micro-batch b equals one micro-batch of k*b", "[trainer][accumulation]") {
    TrialConfig c = test::trainer_config(*find_model("tiny"));
    c.context = 16;
    c.micro_batch = 1;
    c.grad_accum = 4;
    TrialConfig one = c;
    one.micro_batch = 4;
    one.grad_accum = 1;
    test::TrainerRig acc(c, train::synthetic_tokens(c.seed, c.model.vocab));
    test::TrainerRig big(one, train::synthetic_tokens(c.seed, c.model.vocab));
    const double loss_acc = acc.trainer->compute_gradients();
    const double loss_big = big.trainer->compute_gradients();
    CHECK(loss_acc == Approx(loss_big).epsilon(1e-6));
    const train::HostParams ga = acc.trainer->model().download_grads();
    const train::HostParams gb = big.trainer->model().download_grads();
    INFO("max |grad| " << max_value(gb) << ", max |diff| " << max_diff(ga, gb));
    CHECK(max_diff(ga, gb) <= 1e-6 * max_value(gb));

    // And the same update. Adam's first step is lr * g / (|g| + eps): with a
    // larger eps it is smooth in g, so gradients equal to 3e-8 give updates
    // equal to ~1e-6 (with eps 1e-8 a gradient of ~1e-8 could round to
    // either sign and move a weight by 2 lr).
    c.eps = one.eps = 1e-4;
    test::TrainerRig acc2(c, train::synthetic_tokens(c.seed, c.model.vocab));
    test::TrainerRig big2(one, train::synthetic_tokens(c.seed, c.model.vocab));
    acc2.trainer->step();
    big2.trainer->step();
    CHECK(max_diff(acc2.trainer->model().download_weights(), big2.trainer->model().download_weights()) <= 1e-6);
}

TEST_CASE("NEFTune noise changes the loss, reproducibly, and only when alpha > 0", "[trainer][neftune]") {
    TrialConfig c = test::trainer_config(*find_model("tiny"));
    auto first_loss = [](const TrialConfig& cfg) {
        test::TrainerRig rig(cfg, train::synthetic_tokens(cfg.seed, cfg.model.vocab));
        return rig.trainer->compute_gradients();
    };
    const double plain = first_loss(c);
    c.neftune_alpha = 15;
    const double noisy = first_loss(c);
    CHECK(noisy != plain);
    CHECK(first_loss(c) == noisy);
}
