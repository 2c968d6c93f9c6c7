// The ZeRO plan names what each stage shards and moves (core/zero_plan.h);
// the trainer and the estimator follow it instead of comparing stage numbers.
#include <catch2/catch.hpp>

#include <stdexcept>

#include "core/zero_plan.h"

using namespace tune;

TEST_CASE("each ZeRO stage shards one more kind of state", "[zero]") {
    const ZeroPlan z0 = zero_plan(0), z1 = zero_plan(1), z2 = zero_plan(2), z3 = zero_plan(3);
    CHECK_FALSE(
        (z0.shards_optimizer_states || z0.shards_master_weights || z0.shards_gradients || z0.shards_parameters));
    CHECK((z1.shards_optimizer_states && z1.shards_master_weights && !z1.shards_gradients && !z1.shards_parameters));
    CHECK((z2.shards_optimizer_states && z2.shards_master_weights && z2.shards_gradients && !z2.shards_parameters));
    CHECK((z3.shards_optimizer_states && z3.shards_master_weights && z3.shards_gradients && z3.shards_parameters));
    CHECK(z2.stage == 2);
}

TEST_CASE("each stage's collectives: one gradient path and at most one weight gather", "[zero]") {
    for (std::uint32_t s = 0; s <= kMaxZeroStage; ++s) {
        INFO("stage " << s);
        const ZeroPlan z = zero_plan(s);
        CHECK(int{z.all_reduces_gradients()} + int{z.reduce_scatters_after_backward()} +
                  int{z.reduce_scatters_during_backward()} ==
              1);
        CHECK_FALSE((z.gathers_weights_after_update() && z.gathers_weights_before_use()));
        CHECK(z.updates_own_shard_only() == (s >= 1));
    }
    CHECK(zero_plan(0).all_reduces_gradients());
    CHECK(zero_plan(1).reduce_scatters_after_backward());
    CHECK(zero_plan(1).owned_gradients_inside_whole_buffer());
    CHECK(zero_plan(2).reduce_scatters_during_backward());
    CHECK((zero_plan(1).gathers_weights_after_update() && zero_plan(2).gathers_weights_after_update()));
    CHECK(zero_plan(3).gathers_weights_before_use());
    CHECK_FALSE(zero_plan(0).gathers_weights_after_update());
}

TEST_CASE("a stage beyond 3 has no plan", "[zero]") { CHECK_THROWS_AS(zero_plan(4), std::invalid_argument); }
