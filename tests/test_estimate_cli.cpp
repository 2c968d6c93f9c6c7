// `tune estimate`: the single-configuration form (table, JSON) and the sweep form.
#include <catch2/catch.hpp>

#include <fstream>

#include <nlohmann/json.hpp>

#include "support/run_command.h"
#include "test_store_support.h"

using tune::test::run_tune;

namespace {

// `tune <args>`'s memory.views (args end in --json), the run required to succeed.
nlohmann::json views_of(const std::string& args) {
    const auto r = run_tune(args);
    REQUIRE(r.exit_code == 0);
    return nlohmann::json::parse(r.output)["memory"]["views"];
}

}  // namespace

TEST_CASE(
    "tune estimate --json prints the configuration, every component in bytes summing to the peak, and the step time",
    "[cli][estimate]") {
    const auto r = run_tune(
        "estimate --model llama-7b --optimizer adamw --precision bf16-mixed --zero 3 --gpus 8 "
        "--micro-batch 1 --context 4096 --grad-accum 1 --checkpointing full --json");
    REQUIRE(r.exit_code == 0);
    const auto j = nlohmann::json::parse(r.output);
    CHECK(j["config"]["zero_stage"] == 3);
    CHECK(j["config"]["world_size"] == 8);
    CHECK(j["config"]["model"]["name"] == "llama-7b");
    std::uint64_t sum = 0;
    for (const char* k :
         {"params", "master", "grads", "optim", "activations", "logits", "workspace", "comm", "overhead"}) {
        INFO(k);
        REQUIRE(j["memory"].contains(k));
        sum += j["memory"][k].get<std::uint64_t>();
    }
    CHECK(j["memory"]["peak"].get<std::uint64_t>() == sum);
    CHECK(j["memory"]["peak_phase"] == "layer-backward");
    CHECK(j["time"]["step_s"].get<double>() > 0);
    CHECK(j["time"]["tokens_per_s"].get<double>() > 0);
    CHECK(j["time"]["mfu"].get<double>() > 0);
    CHECK(j["fits"] == true);
    CHECK(j["device"] == "h100-80gb");
}

TEST_CASE("tune estimate prints components, the peak phase, time and fits, exit 1 when it does not fit",
          "[cli][estimate]") {
    const auto fits =
        run_tune("estimate --model tiny --device cpu --precision fp32 --micro-batch 2 --context 64 --attention eager");
    CHECK(fits.exit_code == 0);
    for (const char* s : {"params", "activations", "overhead", "3685888", "peak phase   layer-backward", "tokens/s",
                          "MFU", "fits         yes"})
        CHECK_THAT(fits.output, Catch::Contains(s));

    const auto too_big = run_tune("estimate --model llama-70b --optimizer adamw --precision fp32 --zero 0");
    CHECK(too_big.exit_code == 1);
    CHECK_THAT(too_big.output, Catch::Contains("fits         no"));
}

TEST_CASE("tune estimate rejects unknown names with the choices, exit 2", "[cli][estimate]") {
    const auto r = run_tune("estimate --model llama-8b");
    CHECK(r.exit_code == 2);
    CHECK_THAT(r.output, Catch::Contains("llama-7b"));
    CHECK(run_tune("estimate --optimizer sgd").exit_code == 2);
    CHECK(run_tune("estimate --zero 4").exit_code == 2);
    CHECK(run_tune("estimate --memory-limit lots").exit_code == 2);
}

TEST_CASE("tune estimate FILE counts fit, not fit and invalid and prints the predicted front", "[cli][estimate]") {
    const auto r = run_tune(std::string("estimate ") + TUNE_SOURCE_DIR + "/sweeps/llama7b.toml --json");
    REQUIRE(r.exit_code == 0);
    const auto j = nlohmann::json::parse(r.output);
    const auto total = j["combinations"].get<std::uint64_t>();
    CHECK(total == 5 * 4 * 4 * 3 * 3 * 3 * 3 * 2);
    CHECK(j["fit"].get<std::uint64_t>() + j["not_fit"].get<std::uint64_t>() + j["invalid"].get<std::uint64_t>() ==
          total);
    CHECK(j["fit"].get<std::uint64_t>() > 0);
    CHECK(j["not_fit"].get<std::uint64_t>() > 0);
    // LOMO with accumulation is invalid: 1 optimizer x 4 x 4 x 2 accum values x 3 x 3 x 3 x 2.
    CHECK(j["invalid"].get<std::uint64_t>() >= 4 * 4 * 2 * 3 * 3 * 3 * 2);
    const auto& front = j["front"];
    REQUIRE(front.size() > 1);
    for (std::size_t i = 1; i < front.size(); ++i) {
        // Along the front, more memory buys more throughput. Configurations
        // that differ only in a setting that changes nothing tie (selective
        // checkpointing with flash attention keeps and recomputes what none
        // does: docs/memory-model.md §3).
        const auto peak = front[i]["memory"]["peak"].get<std::uint64_t>();
        const auto last_peak = front[i - 1]["memory"]["peak"].get<std::uint64_t>();
        CHECK(peak >= last_peak);
        if (peak > last_peak)
            CHECK(front[i]["time"]["tokens_per_s"].get<double>() > front[i - 1]["time"]["tokens_per_s"].get<double>());
        else
            CHECK(front[i]["time"]["tokens_per_s"].get<double>() == front[i - 1]["time"]["tokens_per_s"].get<double>());
        CHECK(front[i]["fits"] == true);
    }

    const auto text = run_tune(std::string("estimate ") + TUNE_SOURCE_DIR + "/sweeps/llama7b.toml");
    CHECK(text.exit_code == 0);
    CHECK_THAT(text.output, Catch::Contains("12960 configurations"));
    CHECK_THAT(text.output, Catch::Contains("Predicted Pareto front"));
}

TEST_CASE("tune estimate answers invalid for a combination the engine cannot run", "[cli][estimate]") {
    const auto lomo = run_tune("estimate --model tiny --device cpu --optimizer lomo --grad-accum 4");
    CHECK(lomo.exit_code == 1);
    CHECK_THAT(lomo.output, Catch::Contains("invalid") && Catch::Contains("cannot accumulate"));
    CHECK_THAT(lomo.output, !Catch::Contains("fits         yes"));
    const auto json = run_tune("estimate --model tiny --device cpu --optimizer lomo --grad-accum 4 --json");
    CHECK(json.exit_code == 1);
    const auto j = nlohmann::json::parse(json.output);
    CHECK(j["fits"] == false);
    CHECK_THAT(j["invalid"].get<std::string>(), Catch::Contains("lomo"));
    const auto context = run_tune("estimate --model tiny --device cpu --context 100000");
    CHECK(context.exit_code == 1);
    CHECK_THAT(context.output, Catch::Contains("max_context"));
}

// Issue 36's bad input: a combination the named stack cannot run is invalid for it, with its
// reason, never estimated as something the stack would not run.
TEST_CASE("tune estimate --framework F answers invalid for a combination F cannot run", "[cli][estimate]") {
    const auto z1 = run_tune("estimate --model llama-7b --gpus 8 --zero 1 --framework accelerate-fsdp");
    CHECK(z1.exit_code == 1);
    CHECK_THAT(z1.output, Catch::Contains("invalid") && Catch::Contains("ZeRO-1 under accelerate-fsdp"));
    CHECK_THAT(z1.output, !Catch::Contains("as accelerate-fsdp allocated"));
    const auto lomo = run_tune("estimate --model llama-7b --optimizer lomo --framework deepspeed --json");
    CHECK(lomo.exit_code == 1);
    const auto j = nlohmann::json::parse(lomo.output);
    CHECK(j["fits"] == false);
    CHECK(j["framework"] == "deepspeed");
    CHECK_THAT(j["invalid"].get<std::string>(), Catch::Contains("LOMO under DeepSpeed (ZeRO-0)"));
    // Our engine runs both; so does the stack where the rule allows it.
    CHECK(run_tune("estimate --model llama-7b --gpus 8 --zero 1").exit_code == 0);
    CHECK(run_tune("estimate --model llama-7b --optimizer lomo --framework hf-trainer").exit_code == 0);
}

TEST_CASE("tune estimate FILE --framework F counts what F cannot run as invalid, not as not fitting",
          "[cli][estimate]") {
    tune::test::ScratchDir dir;
    const std::string file = dir.file("s.toml");
    std::ofstream(file) << "[model]\npreset = \"llama-7b\"\n[hardware]\ngpus = 8\ndevice = \"h100-80gb\"\n"
                           "[space]\noptimizer = [\"adamw\", \"lion\"]\nzero_stage = [1, 3]\n";
    const auto engine = nlohmann::json::parse(run_tune("estimate " + file + " --json").output);
    CHECK(engine["invalid"] == 0);
    const auto titan = nlohmann::json::parse(run_tune("estimate " + file + " --framework torchtitan --json").output);
    CHECK(titan["framework"] == "torchtitan");
    // torchtitan has no Lion and FSDP no ZeRO-1: only adamw at ZeRO-3 is torchtitan's to run.
    CHECK(titan["invalid"] == 3);
    CHECK(titan["fit"].get<std::uint64_t>() + titan["not_fit"].get<std::uint64_t>() == 1);
}

TEST_CASE("tune estimate --hf-config reads a Hugging Face config.json or its folder", "[cli][estimate]") {
    const std::string folder = std::string(TUNE_SOURCE_DIR) + "/tests/fixtures/hf/qwen3-8b";
    const auto r = run_tune("estimate --hf-config " + folder + "/config.json --precision bf16 --context 2048 --json");
    REQUIRE(r.exit_code == 0);
    const auto j = nlohmann::json::parse(r.output);
    CHECK(j["config"]["model"]["name"] == "Qwen/Qwen3-8B");
    CHECK(j["config"]["model"]["qk_norm"] == true);
    CHECK(j["config"]["model"]["vocab"] == 151936);
    // The folder serves as well, and names the same model.
    const auto again = run_tune("estimate --hf-config " + folder + " --precision bf16 --context 2048 --json");
    REQUIRE(again.exit_code == 0);
    CHECK(nlohmann::json::parse(again.output)["memory"] == j["memory"]);

    const auto both = run_tune("estimate --model llama-7b --hf-config " + folder);
    CHECK(both.exit_code == 2);
    CHECK_THAT(both.output, Catch::Contains("excludes"));
    const auto missing = run_tune("estimate --hf-config /nonexistent/config.json");
    CHECK(missing.exit_code == 2);
    CHECK_THAT(missing.output, Catch::Contains("/nonexistent/config.json"));
}

TEST_CASE("tune estimate --framework reads out allocated, reserved and device for that stack", "[cli][estimate]") {
    const auto r = run_tune(
        "estimate --model llama-7b --method lora --precision bf16 --context 1024 "
        "--framework hf-trainer --json");
    REQUIRE(r.exit_code == 0);
    const auto views = nlohmann::json::parse(r.output)["memory"]["views"];
    CHECK(views["framework"] == "hf-trainer");
    CHECK(views["allocated"].get<std::uint64_t>() <= views["reserved"].get<std::uint64_t>());
    CHECK(views["reserved"].get<std::uint64_t>() < views["device"].get<std::uint64_t>());
    CHECK(views["terms"].size() == 3);  // the logits, the decoder's saved set, AdamW's foreach square roots
    const auto text = run_tune("estimate --model llama-7b --framework torchtitan");
    CHECK_THAT(text.output, Catch::Contains("as torchtitan") && Catch::Contains("reserved beyond allocated"));
    const auto titan = nlohmann::json::parse(
        run_tune("estimate --model llama-7b --framework torchtitan --json").output)["memory"]["views"];
    REQUIRE(titan["cached_terms"].size() == 1);
    CHECK(titan["reserved"].get<std::uint64_t>() > titan["allocated"].get<std::uint64_t>());
    const auto bad = run_tune("estimate --framework megatron");
    CHECK(bad.exit_code == 2);
    CHECK_THAT(bad.output, Catch::Contains("litgpt"));
}

TEST_CASE("tune estimate --base-dtype 16-bit drops the fp32 frozen base a stack would keep", "[cli][estimate]") {
    // Llama-7B LoRA under FSDP on 8 ranks: each rank's fp32 shard of the base is 2 x 842,301,952 bytes more
    // than a bf16 one (32 layers x 25,297,920 + 32,768,512 elements).
    const std::string lora =
        "estimate --model llama-7b --method lora --precision bf16-mixed --zero 3 --gpus 8 --context 2048 "
        "--checkpointing full --framework accelerate-fsdp --json";
    const nlohmann::json fp32 = views_of(lora), half = views_of(lora + " --base-dtype 16-bit");
    CHECK(fp32["allocated"].get<std::uint64_t>() - half["allocated"].get<std::uint64_t>() == 2ULL * 842'301'952);
    CHECK(fp32["base_dtype"] == "fp32");
    CHECK(half["base_dtype"] == "16-bit");
    const auto bad = run_tune(lora + " --base-dtype bf16");
    CHECK(bad.exit_code == 2);
    CHECK_THAT(bad.output, Catch::Contains("--base-dtype"));
}

TEST_CASE("tune estimate --bitsandbytes counts what an older bitsandbytes keeps under QLoRA", "[cli][estimate]") {
    const std::string qlora =
        "estimate --model llama-7b --method qlora --precision bf16 --context 1304 --micro-batch 1 "
        "--checkpointing none --device a100-40gb --framework litgpt --json";
    const nlohmann::json current = views_of(qlora), old = views_of(qlora + " --bitsandbytes 0.41.1");
    const auto allocated = [](const nlohmann::json& views) { return views["allocated"].get<std::uint64_t>(); };
    // 32 layers x 1304 tokens x 2 bytes x (2 x 4096 + 11008): the norms' outputs and the gated product (the
    // output projection reads a view of SDPA's output), held at once with the previous step's.
    CHECK(allocated(old) - allocated(current) == 2ULL * 32 * 1304 * 2 * (2 * 4096 + 11008));
    CHECK(old["bitsandbytes"] == "0.41.1");
    // A LoRA dropout keeps a mask and a copy of each adapted input (all linears here): 3 bytes each of q, k, v's
    // shared input, o's, gate's, up's (4 x 4096) and down's (11008), where lora_A would keep the normed inputs
    // (2 x 2 x 4096) and the gated product (2 x 11008): 32 layers x 1304 tokens x (8 x 4096 + 11008).
    const nlohmann::json dropout = views_of(qlora + " --lora-dropout 0.05");
    CHECK(allocated(dropout) - allocated(current) == 32ULL * 1304 * (8 * 4096 + 11008));
    CHECK(dropout["lora_dropout"] == 0.05);
    CHECK(run_tune(qlora + " --lora-dropout 1").exit_code == 2);
    const auto bad = run_tune(qlora + " --bitsandbytes latest");
    CHECK(bad.exit_code == 2);
    CHECK_THAT(bad.output, Catch::Contains("--bitsandbytes \"latest\" is not a version"));
}
