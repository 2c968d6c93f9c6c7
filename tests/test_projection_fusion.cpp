// q, k, v and gate, up as one GEMM each way (core/projection_fusion.h,
// train/model.h): the rules that allow it, and that the fused layer
// computes the gradients the separate GEMMs do.
#include <catch2/catch.hpp>

#include "core/projection_fusion.h"
#include "support/trainer_fixture.h"
#include "train/model_state.h"

using namespace tune;

namespace {

train::HostParams gradients(const TrialConfig& c) {
    const train::ParamLayout layout = train::make_param_layout(c.model, 1, c.adam8bit_block);
    train::HostParams params = train::random_init(layout, 7, 0.3);
    test::TrainerRig rig(c, std::make_unique<test::FixedTokens>(c.model.vocab), &params);
    rig.trainer->compute_gradients();
    return rig.trainer->model().download_grads();
}

}  // namespace

TEST_CASE(
    "projections fuse in full training of adjacent weights, without a bias, an adapter, a shard, q/k norms or "
    "selective_op",
    "[trainer][fusion]") {
    const ModelSpec m = test::fusable_model();
    const TrialConfig c = test::trainer_config(m);
    CHECK(fuses_qkv(c, m, 256, false));
    CHECK(fuses_gate_up(c, m, 256, false));
    // The micro model: q's 16 x 16 weights fill a slot, k's 8 x 16 half of one; gate's 24 x 16 one and a half.
    CHECK_FALSE(fuses_qkv(c, test::micro_model(), 256, false));
    CHECK_FALSE(fuses_gate_up(c, test::micro_model(), 256, false));
    CHECK_FALSE(fuses_qkv(c, m, 2048, false));  // a larger 8-bit Adam block pads them too
    CHECK_FALSE(fuses_gate_up(c, m, 2048, false));
    ModelSpec variant = m;
    variant.mlp_bias = true;
    CHECK(fuses_qkv(c, variant, 256, false));
    CHECK_FALSE(fuses_gate_up(c, variant, 256, false));
    variant = m, variant.qkv_bias = true;
    CHECK_FALSE(fuses_qkv(c, variant, 256, false));
    CHECK(fuses_gate_up(c, variant, 256, false));
    variant = m, variant.qk_norm = true;
    CHECK_FALSE(fuses_qkv(c, variant, 256, false));
    for (const auto& change :
         {+[](TrialConfig& t) { t.method = Method::lora; }, +[](TrialConfig& t) { t.method = Method::qlora; },
          +[](TrialConfig& t) { t.tensor_parallel = 2; },
          +[](TrialConfig& t) { t.checkpointing = Checkpointing::selective_op; }}) {
        TrialConfig other = c;
        change(other);
        CHECK_FALSE(fuses_qkv(other, m, 256, false));
        CHECK_FALSE(fuses_gate_up(other, m, 256, false));
    }
    // The CPU backend fuses fp32 GEMMs only: its 16-bit ones widen their operands into scratch.
    TrialConfig mixed = c;
    mixed.precision = Precision::bf16_mixed;
    CHECK(fuses_qkv(c, m, 256, true));
    CHECK_FALSE(fuses_qkv(mixed, m, 256, true));
    CHECK_FALSE(fuses_gate_up(mixed, m, 256, true));
    CHECK(fuses_gate_up(mixed, m, 256, false));
    TrialConfig full = c;
    full.checkpointing = Checkpointing::full;
    CHECK(fuses_qkv(full, m, 256, false));
    CHECK(fuses_gate_up(full, m, 256, false));
}

TEST_CASE("fused projections give the gradients of separate GEMMs", "[trainer][fusion]") {
    // selective_op runs every projection apart and recomputes what it drops; none fuses them.
    TrialConfig fused = test::trainer_config(test::fusable_model());
    TrialConfig apart = fused;
    apart.checkpointing = Checkpointing::selective_op;
    REQUIRE((fuses_qkv(fused, fused.model, 256, true) && fuses_gate_up(fused, fused.model, 256, true)));
    REQUIRE_FALSE((fuses_qkv(apart, apart.model, 256, true) || fuses_gate_up(apart, apart.model, 256, true)));
    const train::HostParams a = gradients(fused), b = gradients(apart);
    REQUIRE(a.size() == b.size());
    double largest = 0, worst = 0;
    for (std::size_t i = 0; i < a.size(); ++i)
        for (std::size_t e = 0; e < a[i].size(); ++e) {
            largest = std::max(largest, static_cast<double>(std::abs(b[i][e])));
            worst = std::max(worst, static_cast<double>(std::abs(a[i][e] - b[i][e])));
        }
    INFO("largest gradient " << largest << ", largest difference " << worst);
    CHECK(largest > 0);
    CHECK(worst <= 1e-5 * largest);
}
