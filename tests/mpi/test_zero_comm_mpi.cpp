// Bytes each ZeRO stage's collectives move per step, measured by the MPI
// communicator, against the theory for our flat buffers (ring factors as
// nccl-tests' busbw: an all-reduce sends 2(N-1)/N of its buffer, a
// reduce-scatter or all-gather (N-1)/N), computed call by call here, and
// against the estimator's per-step volume within 1%.
//   stage 0: all-reduce every gradient buffer
//   stage 1: reduce-scatter the gradients, all-gather the updated weights
//   stage 2: reduce-scatter each buffer's bucket per micro-batch (the outer
//            buffer twice: after the LM head and after the embedding), all-gather the weights
//   stage 3: per micro-batch gather every layer in forward and in backward and the
//            outer buffer for the embedding and the head, reduce-scatter as at stage 2
// Stages 1-3 add one scalar all-reduce (the global norm); sharded Adafactor
// two all-reduces of partial sums per buffer; LOMO all-reduces each tensor's
// gradient in every backward pass instead.
#include <catch2/catch.hpp>

#include <fmt/format.h>

#include "core/presets.h"
#include "estimate/estimate_time.h"
#include "tests/mpi/mpi_session.h"
#include "tests/support/trainer_fixture.h"
#include "train/comm/comm_mpi.h"
#include "train/param_layout.h"
#include "train/trial.h"

namespace {

using namespace tune;

struct Ring {
    std::uint64_t n;
    std::uint64_t all_reduce(std::uint64_t bytes) const { return 2 * (n - 1) * bytes / n; }
    std::uint64_t part(std::uint64_t bytes) const { return (n - 1) * bytes / n; }  // reduce-scatter, all-gather
};

// Floats in the first all-reduce of sharded Adafactor's sums for one buffer.
std::uint64_t adafactor_sums(const train::FlatLayout& f) {
    std::uint64_t floats = f.tensors.size();
    for (const train::TensorView& t : f.tensors)
        if (t.matrix()) floats += static_cast<std::uint64_t>(t.rows + t.cols);
    return floats;
}

std::uint64_t expected_bytes(const TrialConfig& c) {
    const Ring ring{c.world_size};
    const train::ParamLayout layout = train::make_param_layout(c.model, c.world_size, c.adam8bit_block);
    const std::uint64_t wb = weight_bytes(c.precision), layers = c.model.layers, ga = c.grad_accum;
    const std::uint64_t pl = static_cast<std::uint64_t>(layout.layer.padded) * wb;
    const std::uint64_t po = static_cast<std::uint64_t>(layout.outer.padded) * wb;
    const std::uint64_t gather_all = layers * ring.part(pl) + ring.part(po);
    const std::uint64_t stage3_gathers = 2 * layers * ring.part(pl) + 2 * ring.part(po);
    if (c.optimizer == Optimizer::lomo) {
        const std::uint64_t passes = c.clip > 0 || c.precision == Precision::fp16_mixed ? 2 : 1;
        std::uint64_t per_pass = 0;
        for (std::size_t i = 0; i < layout.buffers(); ++i)
            for (const train::TensorView& t : layout.flat(i).tensors)
                per_pass += ring.all_reduce(static_cast<std::uint64_t>(t.numel()) * wb);
        std::uint64_t total = passes * per_pass;
        if (c.zero_stage == 1 || c.zero_stage == 2) total += gather_all + ring.part(po);
        if (c.zero_stage == 3) total += passes * stage3_gathers;
        return total;
    }
    const std::uint64_t reduce_buckets = layers * ring.part(pl) + 2 * ring.part(po);
    std::uint64_t total = 0;
    switch (c.zero_stage) {
        case 0:
            total = layers * ring.all_reduce(pl) + ring.all_reduce(po);
            break;
        case 1:
            total = layers * ring.part(pl) + ring.part(po) + gather_all;
            break;
        case 2:
            total = ga * reduce_buckets + gather_all;
            break;
        default:
            total = ga * (stage3_gathers + reduce_buckets);
            break;
    }
    if (c.zero_stage >= 1) total += ring.all_reduce(4);  // the global norm's partial sum
    if (c.zero_stage >= 1 && c.optimizer == Optimizer::adafactor) {
        total += layers *
                 (ring.all_reduce(4 * adafactor_sums(layout.layer)) + ring.all_reduce(4 * layout.layer.tensors.size()));
        total += ring.all_reduce(4 * adafactor_sums(layout.outer)) + ring.all_reduce(4 * layout.outer.tensors.size());
    }
    return total;
}

}  // namespace

TEST_CASE("each ZeRO stage moves the bytes the theory says, per step", "[mpi][zero][comm]") {
    train::MpiComm comm(test::mpi_runtime());
    const int n = comm.world_size();
    double worst_estimate = 0;
    for (std::uint32_t stage = 0; stage <= 3; ++stage)
        for (Optimizer o : kOptimizers)
            for (Precision p : {Precision::fp32, Precision::bf16_mixed, Precision::fp16_mixed})
                for (std::uint32_t ga : {1u, 2u}) {
                    if (o == Optimizer::lomo && ga > 1) continue;
                    TrialConfig c;
                    c.model = *find_model("tiny");
                    c.optimizer = o, c.precision = p, c.zero_stage = stage, c.grad_accum = ga;
                    c.world_size = static_cast<std::uint32_t>(n);
                    c.context = 32, c.micro_batch = 1, c.steps = 2, c.warmup = 0;
                    train::MpiComm fresh(test::mpi_runtime());  // counts from zero
                    const TrialResult r = train::run_trial(c, test::quiet_trial(), fresh);
                    INFO(summary(c) << " on " << n << " ranks: " << r.reason);
                    REQUIRE(r.status == TrialStatus::ok);
                    CHECK(r.comm_bytes == expected_bytes(c));
                    const double predicted = step_time(c.model, c, *find_device("cpu"), EstimateOptions{}).comm_bytes;
                    const double err =
                        std::abs(predicted - static_cast<double>(r.comm_bytes)) / static_cast<double>(r.comm_bytes);
                    INFO("estimated " << predicted << " bytes, measured " << r.comm_bytes);
                    CHECK(err <= 0.01);
                    worst_estimate = std::max(worst_estimate, err);
                }
    if (comm.rank() == 0)
        WARN(fmt::format("{} ranks: worst estimator comm-volume error {:.3f}%", n, 100 * worst_estimate));
}
