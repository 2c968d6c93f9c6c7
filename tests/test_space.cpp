#include <catch2/catch.hpp>

#include <fstream>
#include <set>

#include <nlohmann/json.hpp>

#include "core/collapsed_values.h"
#include "sweep/space.h"
#include "tests/support/run_command.h"

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
)",
                                       "t.toml");
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
)",
                                       "t.toml");
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
)",
                                       "t.toml");
    const SpaceCounts counts = count(expand_space(spec));
    CHECK(counts.valid == 3);  // (1,4), (2,2), (4,1)
    CHECK(counts.invalid.at("global-batch").count == 6);
}

// validate, estimate and the sweep read one rule: what the sweep's stack cannot run is invalid, with its reason.
TEST_CASE("a configuration the sweep's [framework] cannot run is invalid for the sweep", "[space][frameworks]") {
    const std::string text = R"(
[model]
preset = "tiny"
[hardware]
gpus = 2
[space]
optimizer = ["adamw", "lion"]
zero_stage = [1, 3]
)";
    const SpaceCounts engine = count(expand_space(parse_sweep(text, "t.toml")));
    CHECK(engine.valid == 4);
    const SpaceCounts titan = count(expand_space(parse_sweep(text + "[framework]\nname = \"torchtitan\"\n", "t.toml")));
    CHECK(titan.valid == 1);  // adamw at ZeRO-3: torchtitan has no Lion, and FSDP no ZeRO-1
    REQUIRE(titan.invalid.contains("framework"));
    CHECK(titan.invalid.at("framework").count == 3);
    CHECK_THAT(titan.invalid.at("framework").example, Catch::StartsWith("[framework] torchtitan cannot run it: "));
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
)",
                                       "t.toml");
    const TrialConfig c = expand_space(spec).at(0).config;
    CHECK(c.steps == 9);
    CHECK(c.warmup == 3);
    CHECK(c.lr == Approx(0.01));
    CHECK(c.seed == 7);
    CHECK(c.beta2 == Approx(0.95));
    CHECK(c.memory_limit == 64ull << 20);
}

TEST_CASE("a value the engine runs as another value of the space collapses into it, and says why",
          "[space][collapse]") {
    auto spec_with = [](const std::string& checkpointing) {
        return parse_sweep("[model]\npreset = \"tiny\"\n[space]\ncheckpointing = " + checkpointing +
                               "\nattention = [\"flash\", \"eager\"]\ncontext = [128]\n",
                           "t.toml");
    };
    const auto candidates = expand_space(spec_with(R"(["none", "selective", "full"])"));
    REQUIRE(candidates.size() == 6);
    std::size_t collapsed_count = 0;
    for (const auto& c : candidates) {
        const bool same_as_none =
            c.config.checkpointing == Checkpointing::selective && c.config.attention == Attention::flash;
        INFO(summary(c.config));
        CHECK(c.valid() == !same_as_none);  // selective with eager attention drops the scores: its own run
        if (!same_as_none) continue;
        ++collapsed_count;
        CHECK(c.invalid_kind == kCollapsedKind);
        CHECK_THAT(c.invalid_reason, Catch::StartsWith("the same run as ") && Catch::Contains("no attention scores"));
    }
    CHECK(collapsed_count == 1);
    CHECK(count(candidates).invalid.at(std::string(kCollapsedKind)).count == 1);
    // Without none in the space, selective with flash is the only such run: it stays.
    for (const auto& c : expand_space(spec_with(R"(["selective", "full"])"))) CHECK(c.valid());
}

TEST_CASE("tune validate lists collapsed values apart from invalid ones", "[space][collapse][cli]") {
    const std::string path = std::string(TUNE_BUILD_DIR) + "/collapse-validate.toml";
    std::ofstream(path) << "[model]\npreset = \"tiny\"\n[hardware]\ndevice = \"cpu\"\n[space]\n"
                           "checkpointing = [\"none\", \"selective\"]\ncontext = [128]\n";
    const auto r = tune::test::run_tune("validate " + path);
    INFO(r.output);
    CHECK(r.exit_code == 0);
    CHECK_THAT(r.output,
               Catch::Contains("invalid   0") && Catch::Contains("collapsed 1") && Catch::Contains("the same run as"));
    const auto j = nlohmann::json::parse(tune::test::run_tune("validate --json " + path).output);
    CHECK(j["collapsed"]["count"] == 1);
    CHECK(j["runnable"] == 1);
    CHECK(j["invalid"].empty());
}
