// Data parallelism across real ranks: N ranks with micro-batch B after 3
// steps hold the parameters of one rank with micro-batch N*B (fp32), because
// rank r reads rows r*B..(r+1)*B-1 of the same global batch and the
// gradients are averaged. Every rank computes the single-rank reference
// itself (the model is tiny), so the comparison needs no extra traffic.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>

#include "tests/mpi/mpi_session.h"
#include "tests/support/trainer_fixture.h"
#include "train/comm/comm_mpi.h"
#include "train/trainer.h"

namespace {

using namespace tune;

// Largest |a - b| over the real tensors (padding differs between world sizes).
double max_param_diff(const train::ParamLayout& layout, const train::HostParams& a, const train::HostParams& b) {
    double most = 0;
    for (std::size_t i = 0; i < layout.buffers(); ++i)
        for (const train::TensorView& t : layout.flat(i).tensors)
            for (std::int64_t e = t.offset; e < t.offset + t.numel(); ++e) {
                const auto k = static_cast<std::size_t>(e);
                most = std::max(most, std::abs(static_cast<double>(a[i][k]) - b[i][k]));
            }
    return most;
}

// Matrices larger than a shard at 2 and 4 ranks (gate 64x32, the embedding
// 256x32), so shard boundaries cut through tensors: partial Adafactor sums,
// pieces of 8-bit blocks and of LOMO updates are all exercised.
ModelSpec zero_model() { return ModelSpec{"zero", 256, 32, 2, 4, 2, 64, 64, 1e-5, 10000.0}; }

TrialConfig zero_config(Optimizer opt, std::uint32_t stage) {
    TrialConfig c = test::trainer_config(zero_model(), opt);
    c.zero_stage = stage;
    c.micro_batch = 1;
    c.context = 8;
    c.steps = 3;
    // A larger eps keeps Adam's first steps smooth in g, so fp32 reordering of
    // the gradient sums cannot flip a tiny gradient's update (see test_trainer_equivalence).
    c.eps = 1e-4;
    return c;
}

struct Outcome {
    double diff = 0;
    double moved = 0;  // how far the reference moved from its init, for scale
};

Outcome compare_with_single_rank(Optimizer opt, std::uint32_t stage) {
    train::MpiComm comm(test::mpi_runtime());
    TrialConfig ranks = zero_config(opt, stage);
    ranks.world_size = static_cast<std::uint32_t>(comm.world_size());
    TrialConfig one = zero_config(opt, stage);
    one.micro_batch = ranks.micro_batch * ranks.world_size;

    kernels::CpuBackend backend{kernels::CpuBackendOptions{1, 0}};
    const auto tokens = train::synthetic_tokens(ranks.seed, ranks.model.vocab);
    train::Trainer multi(backend, comm, ranks, *tokens);
    test::TrainerRig single(one, train::synthetic_tokens(one.seed, one.model.vocab));
    const train::HostParams init = single.trainer->model().download_weights();
    for (std::uint32_t s = 0; s < ranks.steps; ++s) {
        multi.step();
        single.trainer->step();
    }
    const train::HostParams reference = single.trainer->model().download_weights();
    Outcome o;
    o.diff = max_param_diff(single.trainer->layout(), multi.model().download_weights(), reference);
    o.moved = max_param_diff(single.trainer->layout(), init, reference);
    return o;
}

}  // namespace

TEST_CASE("ZeRO stages 0-3 across ranks equal one rank with the global batch, every optimizer", "[mpi][zero]") {
    for (std::uint32_t stage = 0; stage <= 3; ++stage)
        for (Optimizer opt : kOptimizers) {
            const Outcome o = compare_with_single_rank(opt, stage);
            INFO("stage " << stage << ", " << to_string(opt) << ": max |multi - single| = " << o.diff
                          << ", max |single - init| = " << o.moved);
            CHECK(o.moved > 1e-4);
            // fp32 sums in another order: differences at the level of fp32 rounding of O(1) weights.
            CHECK(o.diff <= 1e-5);
        }
}

TEST_CASE("a stage-0 trial across ranks: averaged losses, every rank's peak, all-reduce volume", "[mpi][zero][trial]") {
    train::MpiComm comm(test::mpi_runtime());
    const int n = comm.world_size();
    TrialConfig c = zero_config(Optimizer::adamw, 0);
    c.world_size = static_cast<std::uint32_t>(n);
    const TrialResult r = train::run_trial(c, test::quiet_trial(), comm);
    REQUIRE(r.status == TrialStatus::ok);
    CHECK(r.rank_peaks.size() == static_cast<std::size_t>(n));
    CHECK(r.memory.peak == *std::max_element(r.rank_peaks.begin(), r.rank_peaks.end()));
    // Every rank holds the same averaged losses.
    std::vector<float> losses(r.losses.begin(), r.losses.end());
    std::vector<float> summed = losses;
    comm.all_reduce(summed.data(), static_cast<std::int64_t>(summed.size()), kernels::DType::f32, train::ReduceOp::sum);
    for (std::size_t i = 0; i < losses.size(); ++i) CHECK(summed[i] == Approx(losses[i] * static_cast<float>(n)));
    // Stage 0 moves one all-reduce of every gradient buffer per step: 2(n-1)/n of its bytes each.
    const train::ParamLayout layout = train::make_param_layout(c.model, c.world_size, c.adam8bit_block);
    std::uint64_t expect = 0;
    for (std::size_t i = 0; i < layout.buffers(); ++i)
        expect += 2 * static_cast<std::uint64_t>(n - 1) * static_cast<std::uint64_t>(layout.flat(i).padded) * 4 /
                  static_cast<std::uint64_t>(n);
    CHECK(r.comm_bytes == expect);
}
