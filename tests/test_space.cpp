#include <catch2/catch.hpp>

#include <set>

#include "search/space.h"

using namespace tune;

TEST_CASE("the space expands to every combination with invalid ones explained", "[space]") {
    const SweepSpec spec = parse_sweep(R"(
[model]
preset = "tiny"
[hardware]
gpus = 2
[space]
optimizer = ["adamw", "lomo"]
precision = ["fp32", "bf16"]
zero_stage = [0, 3]
grad_accum = [1, 4]
checkpointing = ["none", "full"]
context = [128, 512]
micro_batch = [1, 2]
)", "t.toml");
    const auto candidates = expand_space(spec);
    REQUIRE(candidates.size() == 128);
    std::set<std::string> hashes;
    for (const auto& c : candidates) hashes.insert(config_hash(c.config));
    CHECK(hashes.size() == 128);  // all distinct

    const SpaceCounts counts = count(candidates);
    CHECK(counts.total == 128);
    // lomo with grad_accum 4: 1*2*2*1*2*2*2 = 32; context 512 > tiny's 256: 64, 16 of which are also lomo+accum.
    CHECK(counts.invalid.at("lomo-accumulation").count == 32);
    CHECK(counts.invalid.at("context").count == 48);
    CHECK(counts.valid == 128 - 32 - 48);
    for (const auto& c : candidates) {
        CHECK(c.config.world_size == 2);
        if (c.config.optimizer == Optimizer::lomo && c.config.grad_accum > 1) CHECK_FALSE(c.valid());
    }
    CHECK_THAT(counts.invalid.at("context").example, Catch::Contains("exceeds the model's max_context 256"));
}

TEST_CASE("grid order keeps precision and ZeRO stage outermost", "[space]") {
    const SweepSpec spec = parse_sweep(R"(
[model]
preset = "tiny"
[space]
precision = ["fp32", "bf16-mixed"]
zero_stage = [0, 1]
micro_batch = [1, 2]
)", "t.toml");
    const auto c = expand_space(spec);
    REQUIRE(c.size() == 8);
    CHECK(c[0].config.precision == Precision::fp32);
    CHECK(c[3].config.precision == Precision::fp32);
    CHECK(c[4].config.precision == Precision::bf16_mixed);
    CHECK(c[0].config.micro_batch == 1);
    CHECK(c[1].config.micro_batch == 2);
}

TEST_CASE("a global batch constraint keeps only matching combinations", "[space]") {
    const SweepSpec spec = parse_sweep(R"(
[model]
preset = "tiny"
[space]
grad_accum = [1, 2, 4]
micro_batch = [1, 2, 4]
context = [128]
[constraints]
global_batch_tokens = 512
)", "t.toml");
    const SpaceCounts counts = count(expand_space(spec));
    CHECK(counts.valid == 3);  // (1,4), (2,2), (4,1)
    CHECK(counts.invalid.at("global-batch").count == 6);
}

TEST_CASE("sweep settings flow into every trial configuration", "[space]") {
    const SweepSpec spec = parse_sweep(R"(
[model]
preset = "tiny"
[hardware]
memory_limit = "64MiB"
[space]
[trial]
steps = 9
warmup = 3
lr = 0.01
seed = 7
beta2 = 0.95
)", "t.toml");
    const TrialConfig c = expand_space(spec).at(0).config;
    CHECK(c.steps == 9);
    CHECK(c.warmup == 3);
    CHECK(c.lr == Approx(0.01));
    CHECK(c.seed == 7);
    CHECK(c.beta2 == Approx(0.95));
    CHECK(c.memory_limit == 64ull << 20);
}
