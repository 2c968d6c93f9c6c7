// One validity rule set (core/validity.h) for the space, `tune estimate`,
// `tune trial` and the trainer.
#include <catch2/catch.hpp>

#include <cmath>
#include <thread>

#include <nlohmann/json.hpp>

#include "core/presets.h"
#include "core/validity.h"
#include "tests/support/run_command.h"

using namespace tune;

namespace {

TrialConfig tiny() {
    TrialConfig c;
    c.model = *find_model("tiny");
    c.context = 64;
    return c;
}

std::string kind_of(const TrialConfig& c) {
    const auto bad = invalid_reason(c);
    return bad ? std::string(bad->kind) : std::string("valid");
}

}  // namespace

TEST_CASE("a plain configuration is valid", "[validity]") { CHECK(kind_of(tiny()) == "valid"); }

TEST_CASE("lomo cannot accumulate, a context cannot exceed the model's, a stage must exist", "[validity]") {
    TrialConfig c = tiny();
    c.optimizer = Optimizer::lomo;
    c.grad_accum = 4;
    CHECK(kind_of(c) == "lomo-accumulation");
    c = tiny();
    c.context = static_cast<std::uint32_t>(c.model.max_context + 1);
    CHECK(kind_of(c) == "context");
    c = tiny();
    c.zero_stage = 4;
    CHECK(kind_of(c) == "zero-stage");
}

TEST_CASE("the model shape: heads divide hidden, kv_heads divide heads, an even head dim", "[validity]") {
    TrialConfig c = tiny();
    c.model.heads = 3;
    CHECK(kind_of(c) == "model-shape");
    c = tiny();
    c.model.kv_heads = 3;
    CHECK(kind_of(c) == "model-shape");
    c = tiny();
    c.model.kv_heads = 0;
    CHECK(kind_of(c) == "model-shape");
    c = tiny();
    c.model.hidden = c.model.heads * 3;  // head dim 3
    CHECK(kind_of(c) == "model-shape");
}

TEST_CASE(
    "the model's constants: rms_norm_eps above 0 and at most 1, rope_theta from 1 to 1e12, bad input "
    "wherever read",
    "[validity]") {
    for (double eps : {-1.0, 0.0, 2.0, std::nan("")}) {
        TrialConfig c = tiny();
        c.model.rms_norm_eps = eps;
        INFO(eps);
        CHECK(kind_of(c) == "model-constants");
        CHECK(refuses_input(*invalid_reason(c)));
    }
    for (double theta : {0.0, -5.0, 1e13}) {
        TrialConfig c = tiny();
        c.model.rope_theta = theta;
        INFO(theta);
        CHECK(kind_of(c) == "model-constants");
    }
    // `tune trial --config` reads the one rule set: exit 2 before any step, not a failed run.
    TrialConfig c = tiny();
    c.model.rms_norm_eps = -1;
    const auto r = tune::test::run_tune("trial --config '" + nlohmann::json(c).dump() + "'");
    CHECK(r.exit_code == 2);
    CHECK_THAT(r.output, Catch::Contains("rms_norm_eps -1 must be in (0, 1]"));
}

TEST_CASE("dimensions past their bounds are refused before any arithmetic can wrap", "[validity]") {
    TrialConfig c = tiny();
    c.model.vocab = std::uint64_t{1} << 62;  // once "0.000B parameters", fitting in 2.48 MiB
    const auto bad = invalid_reason(c);
    REQUIRE(bad);
    CHECK(bad->kind == "model-size");
    CHECK_THAT(bad->reason, Catch::Contains("vocab"));
    CHECK(refuses_input(*bad));

    ModelSpec huge = c.model;
    huge.vocab = std::uint64_t{1} << 62;
    huge.hidden = std::uint64_t{1} << 62;
    CHECK_FALSE(checked_param_count(huge));
    CHECK(checked_param_count(tiny().model) == tiny().model.param_count());

    c = tiny();
    c.micro_batch = kMaxMicroBatch + 1;
    CHECK(kind_of(c) == "counts");
    c = tiny();
    c.steps = 0;
    CHECK(kind_of(c) == "counts");
}

TEST_CASE("activations beyond any machine are refused, not estimated", "[validity]") {
    TrialConfig c = tiny();
    c.model.max_context = kMaxContext;
    c.context = static_cast<std::uint32_t>(kMaxContext);
    c.micro_batch = kMaxMicroBatch;
    CHECK(kind_of(c) == "model-size");
}

TEST_CASE("the 8-bit block is a power of two from 64 to 4096, hyperparameters in range", "[validity]") {
    for (std::uint32_t block : {0u, 1u, 32u, 100u, 8192u}) {
        TrialConfig c = tiny();
        c.adam8bit_block = block;
        INFO(block);
        CHECK(kind_of(c) == "adam8bit-block");
    }
    TrialConfig c = tiny();
    c.adam8bit_block = 2048;
    CHECK(kind_of(c) == "valid");
    c.lr = -1;
    CHECK(kind_of(c) == "hyperparameters");
    c = tiny();
    c.beta2 = 1.5;
    CHECK(kind_of(c) == "hyperparameters");
}

TEST_CASE("warmup below steps", "[validity]") {
    TrialConfig c = tiny();
    c.steps = 2;
    c.warmup = 2;
    REQUIRE(warmup_problem(c));
    CHECK_THAT(warmup_problem(c)->reason, Catch::Contains("less than steps"));
    c.warmup = 1;
    CHECK_FALSE(warmup_problem(c));
}

TEST_CASE("threads: 0 is the default, negative and absurd counts are refused", "[validity]") {
    CHECK_FALSE(threads_problem(0, 8));
    CHECK_FALSE(threads_problem(8, 8));
    CHECK_FALSE(threads_problem(32, 8));
    CHECK(threads_problem(-5, 8));
    CHECK(threads_problem(100000, 8));
    CHECK_FALSE(threads_problem(1, 0));  // an unknown core count still allows a few
}

TEST_CASE("value problems are bad input, combinations are invalid", "[validity]") {
    CHECK(refuses_input(Invalidity{"adam8bit-block", ""}));
    CHECK(refuses_input(Invalidity{"warmup", ""}));
    CHECK_FALSE(refuses_input(Invalidity{"lomo-accumulation", ""}));
    CHECK_FALSE(refuses_input(Invalidity{"context", ""}));
    CHECK_FALSE(refuses_input(Invalidity{"model-shape", ""}));
}
