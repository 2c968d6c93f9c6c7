// ZeRO across real ranks, measured: every rank's peak and components against
// the estimator (which shares no code with the trainer), model states per
// rank shrinking with N as the ZeRO formulas say, and the bytes each stage's
// collectives move against the theory for our flat buffers. Runs under 2
// and 4 ranks (ctest mpi_ranks_2, mpi_ranks_4).
#include <catch2/catch.hpp>

#include <fmt/format.h>
#include <algorithm>

#include "core/presets.h"
#include "core/validity.h"
#include "estimate/estimate.h"
#include "estimate/flat_layout.h"
#include "tests/mpi/mpi_session.h"
#include "tests/support/trainer_fixture.h"
#include "train/comm/comm_mpi.h"
#include "train/param_layout.h"
#include "train/trial.h"

namespace {

using namespace tune;

TrialConfig tiny_config(Optimizer o, Precision p, std::uint32_t stage, int world) {
    TrialConfig c;
    c.model = *find_model("tiny");
    c.optimizer = o, c.precision = p, c.zero_stage = stage;
    c.world_size = static_cast<std::uint32_t>(world);
    c.context = 32, c.micro_batch = 1, c.steps = 2, c.warmup = 0;
    return c;
}

// `baseline`: the process before the model (the measured overhead), as the trial estimates it.
Estimate estimate_for(const TrialConfig& c, std::uint64_t baseline) {
    EstimateOptions eo;
    eo.cpu_threads = 1;
    eo.overhead_bytes = baseline;
    return estimate(c, *find_device("cpu"), eo);
}

std::uint64_t model_state_bytes(const MemoryBreakdown& m) {
    return m[Component::params] + m[Component::master] + m[Component::grads] + m[Component::optim];
}

}  // namespace

TEST_CASE("every rank's measured peak equals the estimate across stages, optimizers and precisions",
          "[mpi][zero][memory]") {
    train::MpiComm comm(test::mpi_runtime());
    const int n = comm.world_size();
    double worst = 0;
    int runs = 0;
    for (std::uint32_t stage = 0; stage <= 3; ++stage)
        for (Optimizer o : kOptimizers)
            for (Precision p : kPrecisions)
                for (Checkpointing ck : {Checkpointing::none, Checkpointing::full}) {
                    TrialConfig c = tiny_config(o, p, stage, n);
                    c.checkpointing = ck;
                    const TrialResult r = train::run_trial(c, test::quiet_trial(), comm);
                    INFO(summary(c) << " on " << n << " ranks: " << r.reason);
                    REQUIRE(r.status == TrialStatus::ok);
                    const Estimate e = estimate_for(c, r.memory[Component::overhead]);
                    REQUIRE(r.rank_peaks.size() == static_cast<std::size_t>(n));
                    REQUIRE(r.rank_baselines.size() == r.rank_peaks.size());
                    // The breakdown is the highest-peak rank's, so it sums to the reported peak.
                    CHECK(r.memory.total() == r.memory.peak);
                    CHECK(r.memory.peak == *std::max_element(r.rank_peaks.begin(), r.rank_peaks.end()));
                    // Each rank's process baseline is its own; the tagged bytes above it are what must agree.
                    const double tagged_estimate = static_cast<double>(e.memory.peak - e.memory[Component::overhead]);
                    for (std::size_t i = 0; i < r.rank_peaks.size(); ++i) {
                        const double tagged = static_cast<double>(r.rank_peaks[i] - r.rank_baselines[i]);
                        const double err = std::abs(tagged - tagged_estimate) / tagged_estimate;
                        CHECK(err <= 0.01);
                        worst = std::max(worst, err);
                    }
                    for (Component k : kComponents) {
                        INFO(to_string(k) << ": measured " << r.memory[k] << ", estimated " << e.memory[k]);
                        CHECK(r.memory[k] == e.memory[k]);
                    }
                    ++runs;
                }
    CHECK(runs == 4 * 5 * 4 * 2);
    if (comm.rank() == 0)
        WARN(fmt::format("{} ranks: {} configurations, worst per-rank peak mismatch {:.4f}%", n, runs, 100 * worst));
}

TEST_CASE("model states per rank shrink with N as the ZeRO stages say", "[mpi][zero][memory]") {
    train::MpiComm comm(test::mpi_runtime());
    const int n = comm.world_size();
    for (Optimizer o : {Optimizer::adamw, Optimizer::lion, Optimizer::adam8bit})
        for (std::uint32_t stage = 0; stage <= 3; ++stage) {
            const TrialConfig many = tiny_config(o, Precision::bf16_mixed, stage, n);
            TrialConfig one = many;
            one.world_size = 1;
            const TrialResult rn = train::run_trial(many, test::quiet_trial(), comm);
            train::SingleRankComm single;
            const TrialResult r1 = train::run_trial(one, test::quiet_trial(), single);
            REQUIRE(rn.status == TrialStatus::ok);
            REQUIRE(r1.status == TrialStatus::ok);
            INFO(summary(many) << " on " << n << " ranks");
            // Sharded components hold 1/N of the single-rank bytes, up to the
            // padding of each of the L + 1 buffers to N equal aligned shards.
            // At most 8 bytes per element (AdamW's m and v) times one alignment unit per buffer.
            const double slack =
                8.0 * static_cast<double>((many.model.layers + 1) * flat_alignment(many.adam8bit_block));
            auto check = [&](Component k, bool is_sharded) {
                if (!is_sharded) {  // whole, padded to N shards: at most N alignment units more per buffer
                    CHECK(rn.memory[k] >= r1.memory[k]);
                    CHECK(static_cast<double>(rn.memory[k] - r1.memory[k]) <= n * slack);
                    return;
                }
                INFO(to_string(k) << ": " << rn.memory[k] << " bytes per rank of N, " << r1.memory[k] << " on one");
                const double expect = static_cast<double>(r1.memory[k]) / n;
                CHECK(std::abs(static_cast<double>(rn.memory[k]) - expect) <= slack);
            };
            check(Component::master, stage >= 1);
            // 8-bit Adam's small tensors keep replicated full-width state (§2), so only its codes shrink.
            if (o == Optimizer::adam8bit && stage >= 1)
                CHECK(rn.memory[Component::optim] < r1.memory[Component::optim]);
            else
                check(Component::optim, stage >= 1);
            check(Component::grads, stage >= 2);
            check(Component::params, stage >= 3);
            if (stage >= 1) CHECK(model_state_bytes(rn.memory) < model_state_bytes(r1.memory));
        }
}

TEST_CASE("under offload every rank's device and host ledgers equal the estimate", "[mpi][zero][memory][offload]") {
    train::MpiComm comm(test::mpi_runtime());
    const int n = comm.world_size();
    int runs = 0;
    for (Offload off : {Offload::optimizer, Offload::optimizer_params})
        for (std::uint32_t stage : {2u, 3u})
            for (Optimizer o : {Optimizer::adamw, Optimizer::lion})
                for (Precision p : kPrecisions) {
                    TrialConfig c = tiny_config(o, p, stage, n);
                    c.offload = off;
                    if (invalid_reason(c)) continue;
                    const TrialResult r = train::run_trial(c, test::quiet_trial(), comm);
                    INFO(summary(c) << " on " << n << " ranks: " << r.reason);
                    REQUIRE(r.status == TrialStatus::ok);
                    const Estimate e = estimate_for(c, r.memory[Component::overhead]);
                    for (Component k : kComponents) {
                        INFO(to_string(k) << ": device " << r.memory[k] << " vs " << e.memory[k] << ", host "
                                          << r.host_memory[k] << " vs " << e.host_memory[k]);
                        CHECK(r.memory[k] == e.memory[k]);
                        CHECK(r.host_memory[k] == e.host_memory[k]);
                    }
                    // Every rank holds its shard's states on the host: the same bytes on each.
                    REQUIRE(r.rank_host_peaks.size() == static_cast<std::size_t>(n));
                    for (std::uint64_t host : r.rank_host_peaks) CHECK(host == e.host_memory.peak);
                    // The device keeps none of what moved (the estimate without offload holds it there), and
                    // at most one bucket more: the previous one, while its slice crosses to the host
                    // (docs/memory-model.md §10).
                    TrialConfig kept = c;
                    kept.offload = Offload::none;
                    const Estimate on_device = estimate_for(kept, r.memory[Component::overhead]);
                    const FlatLayout f = flat_layout(c.model, c.adam8bit_block);
                    const std::uint64_t bucket =
                        full_numel(std::max(f.layer.numel, f.outer.numel), n, f.align) * weight_bytes(c.precision);
                    const std::uint64_t both = e.memory.peak + e.host_memory.peak;
                    CHECK(both >= on_device.memory.peak);
                    CHECK(both - on_device.memory.peak <= bucket);
                    ++runs;
                }
    CHECK(runs == 24);  // optimizer at stages 2 and 3, optimizer+params at 3: 3 x 2 x 4
}
