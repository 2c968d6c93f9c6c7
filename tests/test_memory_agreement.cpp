// The estimator (estimate/estimate) and the trainer's allocator agree: for
// every single-rank configuration of a grid on the tiny model (5 optimizers
// x 4 precisions x 3 checkpointing modes x grad_accum {1, 4} x 2 contexts x
// 2 micro-batches x 2 attention kernels; LOMO with accumulation is invalid),
// the measured peak is within 1% of the estimate and every component within 2%. They share no
// code: docs/memory-model.md is the contract both follow.
#include <catch2/catch.hpp>

#include <fmt/format.h>

#include "core/presets.h"
#include "core/validity.h"
#include "estimate/estimate.h"
#include "support/memory_agreement.h"
#include "support/trainer_fixture.h"
#include "train/trial.h"

using namespace tune;

namespace {

// A single-rank trial of `c` at context 32, micro-batch 2, one step, against its estimate.
void check_exact_agreement(TrialConfig c) {
    c.context = 32, c.micro_batch = 2, c.steps = 1, c.warmup = 0;
    test::check_exact_agreement(c);
}

}  // namespace

TEST_CASE("measured memory agrees with the estimator over the grid", "[memory][estimate][slow]") {
    double worst_peak = 0, worst_component = 0;
    std::string worst;
    int runs = 0;
    for (Optimizer o : kOptimizers)
        for (Precision p : kPrecisions)
            for (Checkpointing ck : kCheckpointings)
                for (std::uint32_t ga : {1u, 4u})
                    for (std::uint32_t ctx : {32u, 64u})
                        for (std::uint32_t mb : {1u, 2u})
                            for (Attention at : kAttentions) {
                                TrialConfig c;
                                c.model = *find_model("tiny");
                                c.optimizer = o, c.precision = p, c.checkpointing = ck, c.attention = at;
                                c.grad_accum = ga, c.context = ctx, c.micro_batch = mb;
                                c.steps = 1, c.warmup = 0;
                                if (o == Optimizer::lomo && ga > 1) continue;
                                const auto [r, e] = test::run_and_estimate(c);
                                INFO(summary(c));
                                const double peak_err = std::abs(static_cast<double>(r.memory.peak) - e.memory.peak) /
                                                        static_cast<double>(e.memory.peak);
                                CHECK(peak_err <= 0.01);
                                for (Component k : kComponents) {
                                    const double want = static_cast<double>(e.memory[k]);
                                    const double err =
                                        std::abs(static_cast<double>(r.memory[k]) - want) / std::max(want, 1.0);
                                    INFO(to_string(k) << ": measured " << r.memory[k] << ", estimated " << e.memory[k]);
                                    CHECK(err <= 0.02);
                                    worst_component = std::max(worst_component, err);
                                }
                                if (peak_err >= worst_peak) {
                                    worst_peak = peak_err;
                                    worst = summary(c);
                                }
                                ++runs;
                            }
    // 16 shapes per optimizer, precision and mode; LOMO runs grad_accum 1 only (8).
    CHECK(runs == (4 * 16 + 8) * 4 * static_cast<int>(kCheckpointings.size()));
    WARN(fmt::format("{} configurations; worst peak mismatch {:.4f}% ({}), worst component {:.4f}%", runs,
                     100 * worst_peak, worst, 100 * worst_component));
}

TEST_CASE("measured memory agrees with the estimator for ZeRO stages 1-3 on one rank", "[memory][estimate]") {
    // One rank: shards are whole buffers, but stage 2-3 buckets and stage 3 gathers are real.
    int runs = 0;
    for (std::uint32_t stage : {1u, 2u, 3u})
        for (Optimizer o : kOptimizers)
            for (Precision p : kPrecisions)
                for (Attention at : kAttentions) {
                    TrialConfig c;
                    c.model = *find_model("tiny");
                    c.optimizer = o, c.precision = p, c.zero_stage = stage, c.attention = at;
                    check_exact_agreement(c);
                    ++runs;
                }
    CHECK(runs == 120);
}

TEST_CASE("measured memory agrees with the estimator for biases, q/k norms, tied embeddings and head_dim",
          "[memory][estimate]") {
    // tiny with every variant the trainer runs beyond Llama's shape: the bias
    // GEMMs' ones, the q/k norms' kept projections and rstd, LOMO's tied
    // embedding gradient held through the layers, QLoRA's 16-bit vectors.
    const ModelSpec m = *find_model("tiny-variants");
    int runs = 0;
    auto agree = [&](TrialConfig c) {
        c.model = m;
        check_exact_agreement(c);
        ++runs;
    };
    for (Optimizer o : kOptimizers)
        for (Precision p : kPrecisions)
            for (const auto& [stage, ck] : {std::pair{0u, Checkpointing::none}, std::pair{3u, Checkpointing::full}}) {
                TrialConfig c;
                c.optimizer = o, c.precision = p, c.zero_stage = stage, c.checkpointing = ck;
                agree(c);
            }
    for (Method method : {Method::lora, Method::qlora}) {
        TrialConfig c;
        c.method = method, c.precision = Precision::bf16_mixed, c.lora_rank = 4;
        agree(c);
    }
    CHECK(runs == 42);
}

TEST_CASE("measured memory agrees with the estimator for LoRA on q and v only", "[memory][estimate][lora]") {
    int runs = 0;
    for (Method method : {Method::lora, Method::qlora})
        for (std::uint32_t stage : {0u, 3u})
            for (Optimizer o : {Optimizer::adamw, Optimizer::lomo}) {
                TrialConfig c;
                c.model = *find_model("tiny");
                c.method = method, c.lora_rank = 8, c.lora_targets = LoraTargets::qv;
                c.precision = Precision::bf16_mixed, c.zero_stage = stage, c.optimizer = o;
                check_exact_agreement(c);
                ++runs;
            }
    CHECK(runs == 8);
}

TEST_CASE("an offloaded CPU trial's real peak is the device's: the process's less the host ledger",
          "[memory][offload]") {
    // The process holds both ledgers; the real peak a trial reports (and calibration, the accuracy
    // and the reports compare with the device estimate) is what is left beside the host ledger, so
    // it is the device's tagged peak plus what no tag explains, as without offload.
    TrialConfig c;
    c.model = *find_model("tiny");
    c.offload = Offload::optimizer, c.zero_stage = 2, c.precision = Precision::bf16_mixed;
    const TrialResult r = test::run_and_estimate(c).trial;
    REQUIRE(r.host_memory.peak > 0);
    CHECK(static_cast<std::int64_t>(r.real_peak) == static_cast<std::int64_t>(r.memory.peak) + r.untracked);
}

TEST_CASE("measured memory agrees with the estimator under offload, on the device and the host",
          "[memory][estimate][offload]") {
    // Every optimizer the host can update, every precision, both offloads where they run, full
    // fine-tuning, LoRA and QLoRA (whose frozen base joins the host at optimizer+params).
    int runs = 0;
    for (Offload off : {Offload::optimizer, Offload::optimizer_params})
        for (std::uint32_t stage : {2u, 3u})
            for (Optimizer o : {Optimizer::adamw, Optimizer::lion})
                for (Precision p : kPrecisions)
                    for (Method method : kMethods) {
                        TrialConfig c;
                        c.model = *find_model("tiny");
                        c.offload = off, c.zero_stage = stage, c.optimizer = o, c.precision = p, c.method = method;
                        c.lora_rank = 4;
                        if (invalid_reason(c)) continue;
                        check_exact_agreement(c);
                        ++runs;
                    }
    // Full and LoRA: optimizer at stages 2 and 3, optimizer+params at 3 only (3 x 2 x 4 x 2); QLoRA
    // the same at its three 16-bit precisions (3 x 2 x 3).
    CHECK(runs == 66);
}
