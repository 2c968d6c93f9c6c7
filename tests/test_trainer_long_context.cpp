// Long contexts on the CPU with flash attention: a small model trains at
// 1024 to 4096 tokens per sequence, its memory is what the estimator says to
// the byte, and no (s, s) buffer exists (eager at 4096 would keep 256 MiB of
// probabilities per layer for this model; flash keeps a 64 KiB lse per layer).
#include <catch2/catch.hpp>

#include <cmath>

#include "estimate/estimate.h"
#include "support/trainer_fixture.h"
#include "train/trial.h"

using namespace tune;

TEST_CASE("a small model trains at contexts up to 4096 on the CPU with flash attention", "[trainer][flash]") {
    const std::uint32_t context = GENERATE(1024u, 4096u);
    TrialConfig c;
    c.model = *find_model("tiny");
    c.model.max_context = 4096;
    c.precision = Precision::bf16_mixed;
    c.context = context;
    c.steps = 1, c.warmup = 0;
    INFO(summary(c));
    const TrialResult r = train::run_trial(c, test::quiet_trial());
    INFO(r.reason);
    REQUIRE(r.status == TrialStatus::ok);
    REQUIRE(!r.losses.empty());
    CHECK(std::isfinite(r.losses.back()));

    EstimateOptions eo;
    eo.cpu_threads = 1;
    eo.overhead_bytes = r.baseline;  // the process before the model, as the trial estimates it
    const Estimate e = estimate(c, *find_device("cpu"), eo);
    CHECK(r.memory.peak == e.memory.peak);
    CHECK(r.memory[Component::activations] == e.memory[Component::activations]);
    CHECK(r.memory[Component::workspace] == e.memory[Component::workspace]);

    // Eager would keep at least one more layer's probabilities, (b, heads, s, s) in bf16.
    const std::uint64_t probs = 2ull * c.model.heads * context * context;
    TrialConfig eager = c;
    eager.attention = Attention::eager;
    CHECK(estimate(eager, *find_device("cpu"), eo).memory.peak > r.memory.peak + probs);
}
