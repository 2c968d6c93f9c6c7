// Training on the emulated device: `tune selftest`'s three-step cases per
// optimizer and precision against the CPU, and a short `tune trial` per
// optimizer and precision through run_trial on the CUDA backend (the path a
// sweep's trial takes: memory statistics, estimate, timing).
#include "emu_cases.h"
#include "short_trial.h"

#include <fmt/format.h>

#include "core/presets.h"
#include "harness/comm/comm.h"
#include "harness/comm/comm_nccl.h"
#include "harness/selftest_training.h"
#include "harness/trial.h"
#include "search/estimate.h"

using namespace tune;

namespace {

void training_cases_for(const char* optimizer) {
    tune_emu_test::run_cases(harness::training_cases(), {std::string("train_3_steps/") + optimizer});
}

// Two steps of the tiny model, the second timed; checkpointing and
// accumulation vary with the optimizer so every mode runs somewhere.
TrialConfig short_trial(Optimizer o, Precision p) {
    TrialConfig c = tune_emu_test::tiny_short_trial(o, p);
    c.checkpointing = static_cast<Checkpointing>(static_cast<int>(o) % 3);
    return c;
}

}  // namespace

TEST_CASE("emulated device: AdamW training cases") { training_cases_for("adamw"); }
TEST_CASE("emulated device: Lion training cases") { training_cases_for("lion"); }
TEST_CASE("emulated device: 8-bit Adam training cases") { training_cases_for("adam8bit"); }
TEST_CASE("emulated device: Adafactor training cases") { training_cases_for("adafactor"); }
TEST_CASE("emulated device: LOMO training cases") { training_cases_for("lomo"); }

// Through a one-rank NCCL communicator at ZeRO stages 0-3 (so sharded
// states, buckets and gathers go through NCCL in every dtype), and the
// estimator's workspace term against the trainer's workspace on CUDA.
TEST_CASE("emulated device: a short trial per optimizer and precision runs ok on the CUDA backend over NCCL") {
    harness::TrialOptions options;
    options.backend = BackendKind::cuda;
    options.log = nullptr;
    int index = 0;
    for (Optimizer o : {Optimizer::adamw, Optimizer::lion, Optimizer::adam8bit, Optimizer::adafactor, Optimizer::lomo})
        for (Precision p : {Precision::fp32, Precision::bf16_mixed, Precision::fp16_mixed, Precision::bf16}) {
            TrialConfig c = short_trial(o, p);
            c.zero_stage = static_cast<std::uint32_t>(index++ % 4);
            const auto nccl = harness::make_nccl_comm(harness::new_nccl_id(), 0, 1, harness::NcclPlacement{0, nullptr});
            const TrialResult r = harness::run_trial(c, options, *nccl);
            INFO(to_string(o) << " " << to_string(p) << " zero " << c.zero_stage << ": " << r.reason);
            REQUIRE(r.status == TrialStatus::ok);
            CHECK(r.losses.size() == c.steps);
            // A GPU trial's result names the attention it ran (here tune's kernels: no cuDNN is set).
            CHECK_THAT(r.attention, Catch::StartsWith("tune's kernels") || Catch::StartsWith("cuDNN"));
            const Estimate e = estimate(c, *find_device("h100-80gb"), EstimateOptions{});
            INFO("workspace: measured " << r.memory[Component::workspace] << ", estimated "
                                        << e.memory[Component::workspace]);
            CHECK(r.memory[Component::workspace] == e.memory[Component::workspace]);
        }
}

TEST_CASE("emulated device: lora and qlora trials run on the CUDA backend at stages 0 and 3, memory as estimated") {
    harness::TrialOptions options;
    options.backend = BackendKind::cuda;
    options.log = nullptr;
    for (int run = 0; run < 4; ++run) {
        const Method method = run % 2 == 0 ? Method::lora : Method::qlora;
        const std::uint32_t stage = run < 2 ? 0 : 3;
        TrialConfig c = short_trial(Optimizer::adamw, Precision::bf16_mixed);
        c.method = method;
        c.lora_rank = 8;
        c.zero_stage = stage;  // qlora at stage 3: its NF4 shard gathered through NCCL before each use
        const auto nccl = harness::make_nccl_comm(harness::new_nccl_id(), 0, 1, harness::NcclPlacement{0, nullptr});
        const TrialResult r = harness::run_trial(c, options, *nccl);
        INFO(summary(c) << ": " << r.reason);
        REQUIRE(r.status == TrialStatus::ok);
        CHECK(r.losses.size() == c.steps);
        const Estimate e = estimate(c, *find_device("h100-80gb"), EstimateOptions{});
        CHECK(r.memory[Component::workspace] == e.memory[Component::workspace]);
        CHECK(r.memory[Component::params] == e.memory[Component::params]);
    }
}

TEST_CASE("emulated device: offload is refused on the CUDA backend, saying where it runs") {
    // The GPU engine has no host copies of the optimizer yet (harness/trainer.h): the trial is
    // invalid, not failed, and names the backend that runs it; the estimate still holds.
    harness::TrialOptions options;
    options.backend = BackendKind::cuda;
    options.log = nullptr;
    TrialConfig c = short_trial(Optimizer::adamw, Precision::bf16_mixed);
    c.zero_stage = 2, c.offload = Offload::optimizer;
    const auto nccl = harness::make_nccl_comm(harness::new_nccl_id(), 0, 1, harness::NcclPlacement{0, nullptr});
    const TrialResult r = harness::run_trial(c, options, *nccl);
    CHECK(r.status == TrialStatus::invalid);
    CHECK_THAT(r.reason, Catch::Contains("CPU backend only"));
    CHECK(estimate(c, *find_device("h100-80gb"), EstimateOptions{}).host_memory.peak > 0);
}
