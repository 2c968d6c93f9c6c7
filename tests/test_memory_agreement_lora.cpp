// The estimator and the trainer's allocator agree to the byte for LoRA and
// QLoRA (docs/memory-model.md §9): every optimizer and precision, each
// checkpointing mode, ZeRO stages 0-3 on one rank (qlora's stage 3 gathers
// its NF4 shards; tests/mpi/test_qlora_zero3_mpi.cpp across ranks), attention
// and all-linear targets.
#include <catch2/catch.hpp>

#include <fmt/format.h>

#include "core/presets.h"
#include "estimate/estimate.h"
#include "support/memory_agreement.h"
#include "support/trainer_fixture.h"
#include "train/trial.h"

using namespace tune;

namespace {

TrialConfig adapter_config(Method method, Optimizer o, Precision p) {
    TrialConfig c;
    c.model = *find_model("tiny");
    c.method = method;
    c.lora_rank = 8;
    c.optimizer = o, c.precision = p;
    c.context = 32, c.micro_batch = 2, c.steps = 1, c.warmup = 0;
    return c;
}

}  // namespace

TEST_CASE("lora and qlora: measured memory equals the estimate, byte for byte", "[memory][estimate][lora]") {
    int runs = 0;
    for (Method method : {Method::lora, Method::qlora})
        for (Optimizer o : kOptimizers)
            for (Precision p : kPrecisions) {
                if (method == Method::qlora && p == Precision::fp32) continue;
                for (Checkpointing ck : kCheckpointings) {
                    TrialConfig c = adapter_config(method, o, p);
                    c.checkpointing = ck;
                    c.lora_targets = ck == Checkpointing::selective ? LoraTargets::attention : LoraTargets::all_linear;
                    c.grad_accum = o == Optimizer::lomo ? 1 : 2;
                    test::check_exact_agreement(c);
                    ++runs;
                }
                for (std::uint32_t stage : {1u, 2u, 3u}) {
                    TrialConfig c = adapter_config(method, o, p);
                    c.zero_stage = stage;
                    test::check_exact_agreement(c);
                    ++runs;
                }
            }
    // 20 lora and 15 qlora optimizer-precision pairs, each at every checkpointing mode and ZeRO 1-3.
    CHECK(runs == 35 * static_cast<int>(kCheckpointings.size() + 3));
}
