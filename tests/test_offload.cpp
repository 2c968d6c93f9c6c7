// Offload as a search dimension (core/offload_plan.h): where it may run
// (core/validity.cpp), how the estimator splits device and host ledgers and
// which limit binds, its time on a GPU, the sweep file's host memory, and the
// records that carry both ledgers. The ledgers' agreement with the trainer is
// in test_memory_agreement.cpp (one rank) and tests/mpi (two and four).
#include <catch2/catch.hpp>

#include <algorithm>

#include <fmt/format.h>

#include "core/dimensions.h"
#include "core/offload_plan.h"
#include "core/presets.h"
#include "core/units.h"
#include "core/validity.h"
#include "estimate/estimate.h"
#include "estimate/estimate_memory.h"
#include "estimate/flat_layout.h"
#include "estimate/frameworks/framework_profile.h"
#include "exports/framework.h"
#include "sweep/spec.h"

using namespace tune;

namespace {

TrialConfig llama7b_offload(Offload off) {
    TrialConfig c;
    c.model = *find_model("llama-7b");
    c.optimizer = Optimizer::adamw, c.precision = Precision::bf16_mixed;
    c.zero_stage = 2, c.checkpointing = Checkpointing::full;
    c.micro_batch = 1, c.context = 2048;
    c.offload = off;
    return c;
}

}  // namespace

TEST_CASE("offload runs where a host optimizer and ZeRO's buckets exist, and says why elsewhere", "[offload]") {
    TrialConfig c;
    c.model = *find_model("tiny");
    c.zero_stage = 2, c.offload = Offload::optimizer;
    CHECK_FALSE(invalid_reason(c));
    c.optimizer = Optimizer::lion;
    CHECK_FALSE(invalid_reason(c));
    for (Optimizer o : {Optimizer::adam8bit, Optimizer::adafactor, Optimizer::lomo}) {
        c.optimizer = o;
        const auto bad = invalid_reason(c);
        REQUIRE(bad);
        CHECK(bad->kind == "offload-optimizer");
        CHECK_THAT(bad->reason, Catch::Contains(std::string(to_string(o))));
    }
    c.optimizer = Optimizer::adamw;
    for (std::uint32_t stage : {0u, 1u}) {
        c.zero_stage = stage;
        const auto bad = invalid_reason(c);
        REQUIRE(bad);
        CHECK(bad->kind == "offload-zero-stage");
        CHECK_THAT(bad->reason, Catch::Contains("use zero_stage 2 or 3"));
    }
    c.zero_stage = 2, c.offload = Offload::optimizer_params;
    REQUIRE(invalid_reason(c));
    CHECK_THAT(invalid_reason(c)->reason, Catch::Contains("ZeRO stage 3"));
    c.zero_stage = 3;
    CHECK_FALSE(invalid_reason(c));
    // FSDP-QLoRA offloads its NF4 base with the rest (PEFT's docs/source/accelerate/fsdp.md).
    c.method = Method::qlora, c.precision = Precision::bf16_mixed;
    CHECK_FALSE(invalid_reason(c));
    // A sweep's grid makes these combinations: they are skipped, never refused as input.
    for (std::string_view kind : {"offload-optimizer", "offload-zero-stage"})
        CHECK_FALSE(refuses_input(Invalidity{kind, ""}));
}

TEST_CASE("the offload dimension is one row: its values, its flag and its place in a summary", "[offload]") {
    const Dimension* d = find_dimension("offload");
    REQUIRE(d != nullptr);
    CHECK(d->flag == "--offload");
    CHECK(d->parse("optimizer+params") == DimValue{2});
    CHECK_FALSE(d->parse("params"));
    TrialConfig c;
    CHECK_THAT(summary(c), !Catch::Contains("offload"));  // the default stays out, as before the row existed
    c.offload = Offload::optimizer;
    CHECK_THAT(summary(c), Catch::Contains("offload=optimizer"));
    // JSON round trip, and a config without the key reads as none.
    const TrialConfig back = nlohmann::json(c).get<TrialConfig>();
    CHECK(back.offload == Offload::optimizer);
    CHECK_FALSE(nlohmann::json(TrialConfig{}).contains("offload"));
}

TEST_CASE("the plan names what lives on the host", "[offload]") {
    constexpr OffloadPlan none = offload_plan(Offload::none);
    constexpr OffloadPlan opt = offload_plan(Offload::optimizer);
    constexpr OffloadPlan all = offload_plan(Offload::optimizer_params);
    for (Component k : kComponents) CHECK_FALSE(none.on_host(k));
    for (Component k : {Component::master, Component::optim, Component::grads}) {
        CHECK(opt.on_host(k));
        CHECK(all.on_host(k));
    }
    CHECK_FALSE(opt.on_host(Component::params));
    CHECK(all.on_host(Component::params));
    for (Component k :
         {Component::activations, Component::logits, Component::workspace, Component::comm, Component::overhead})
        CHECK_FALSE(all.on_host(k));
}

TEST_CASE("the estimator moves offloaded states from the device's ledger to the host's, byte for byte",
          "[offload][estimate]") {
    const Hardware hw = *find_device("h100-80gb");
    for (Offload off : {Offload::optimizer, Offload::optimizer_params}) {
        TrialConfig c = llama7b_offload(off);
        c.zero_stage = 3, c.world_size = 4;
        TrialConfig kept = c;
        kept.offload = Offload::none;
        const StepMemory e = step_memory(c.model, c, hw, {}), d = step_memory(c.model, kept, hw, {});
        INFO(summary(c));
        for (Component k : kComponents) {
            const bool host = offload_plan(off).on_host(k);
            CHECK(e.host[k] == (host ? d.at(Phase::forward)[k] : 0));
            // Every phase's device ledger loses the host's buffers; what else moves is the buckets' (below).
            for (Phase p : kPhases)
                if (k != Component::comm && (p != Phase::layer_backward || k != Component::activations))
                    CHECK(e.at(p)[k] == (host ? 0 : d.at(p)[k]));
        }
        const Estimate est = estimate(c, hw);
        CHECK(est.host_memory.peak == est.host_memory.total());
        CHECK(est.host_memory.peak_phase == "init");
        CHECK(est.host_node_bytes == 4 * est.host_memory.peak);  // four ranks on one node share its memory
    }
    // Without offload the host's ledger is empty.
    const Estimate none = estimate(llama7b_offload(Offload::none), hw);
    CHECK(none.host_memory.peak == 0);
    CHECK(none.host_node_bytes == 0);
}

// train/trainer.cpp BucketSink: offload's slice crosses the link on the side stream while the next
// buffer's backward runs, so that backward holds the previous bucket too: the layers' first beside the
// head's, a lower layer beside the one above it (less that layer's kept activations, freed by then), and
// the embedding's beside layer 0's. Nothing else moves.
TEST_CASE("offload's backward holds the previous gradient bucket while its slice crosses to the host",
          "[offload][estimate]") {
    const Hardware hw = *find_device("h100-80gb");
    for (std::uint32_t stage : {2u, 3u})
        for (Checkpointing ck : {Checkpointing::full, Checkpointing::none}) {
            TrialConfig c = llama7b_offload(Offload::optimizer);
            c.zero_stage = stage, c.world_size = 4, c.checkpointing = ck;
            TrialConfig kept = c;
            kept.offload = Offload::none;
            INFO(summary(c));
            const StepMemory e = step_memory(c.model, c, hw, {}), d = step_memory(c.model, kept, hw, {});
            const FlatLayout f = flat_layout(c.model, c.adam8bit_block);
            const std::uint64_t layer = full_numel(f.layer.numel, 4, f.align) * 2;  // 16-bit buckets
            const std::uint64_t outer = full_numel(f.outer.numel, 4, f.align) * 2;
            const ActivationSizes a = activation_sizes(c.model, c, hw, {});
            const auto moved = [&](Phase p, Component k) {
                return static_cast<std::int64_t>(e.at(p)[k]) - static_cast<std::int64_t>(d.at(p)[k]);
            };
            for (Phase p : {Phase::forward, Phase::head_backward, Phase::optimizer_step})
                CHECK(moved(p, Component::comm) == 0);
            CHECK(moved(Phase::embed_backward, Component::comm) == static_cast<std::int64_t>(layer));
            // The layer phase is the larger of its two moments.
            const std::int64_t first = static_cast<std::int64_t>(outer);
            const std::int64_t lower = static_cast<std::int64_t>(layer) - static_cast<std::int64_t>(a.kept);
            const bool first_wins = first >= lower;
            CHECK(moved(Phase::layer_backward, Component::comm) ==
                  static_cast<std::int64_t>(first_wins ? outer : layer));
            CHECK(moved(Phase::layer_backward, Component::activations) ==
                  (first_wins ? 0 : -static_cast<std::int64_t>(a.kept)));
        }
    // Adapters: the head is frozen and has no bucket, so only the lower layers hold one more.
    TrialConfig lora = llama7b_offload(Offload::optimizer);
    lora.method = Method::lora, lora.lora_rank = 16, lora.checkpointing = Checkpointing::none;
    TrialConfig kept = lora;
    kept.offload = Offload::none;
    const StepMemory e = step_memory(lora.model, lora, hw, {}), d = step_memory(lora.model, kept, hw, {});
    const ActivationSizes a = activation_sizes(lora.model, lora, hw, {});
    const std::uint64_t adapters =
        full_numel(adapter_buffer(lora.model, 16, lora.lora_targets, lora.adam8bit_block).numel, 1, 256) * 2;
    const ComponentBytes& held = e.at(Phase::layer_backward);
    const ComponentBytes& before = d.at(Phase::layer_backward);
    CHECK(held[Component::comm] - before[Component::comm] == (adapters > a.kept ? adapters : 0));
}

TEST_CASE("Llama-2-7B AdamW bf16-mixed fits one 24 GB GPU with 128 GB of host memory once offloaded",
          "[offload][estimate]") {
    const Hardware hw = *find_device("rtx4090");
    EstimateOptions o;
    o.host_memory = 128 * GiB;
    const Estimate on_device = estimate(llama7b_offload(Offload::none), hw, o);
    CHECK_FALSE(on_device.fits);
    CHECK(on_device.limit == "device");
    const TrialConfig c = llama7b_offload(Offload::optimizer);
    const Estimate e = estimate(c, hw, o);
    CHECK(e.fits);
    CHECK(e.limit.empty());
    // fp32 master and both AdamW moments (12 bytes a parameter) and the 16-bit gradients (2).
    const double per_param = static_cast<double>(e.host_memory.peak) / static_cast<double>(c.model.param_count());
    CHECK(per_param >= 12.0);
    CHECK(per_param <= 16.0);
    // Its step carries the host link's copies and the CPU's update, which the device-only step has not.
    const StepTime t = step_time(c.model, c, hw, o);
    CHECK(t.offload_s > 0);
    CHECK(t.optimizer_s == 0);
    const StepTime kept = step_time(c.model, llama7b_offload(Offload::none), hw, o);
    CHECK(kept.offload_s == 0);
    CHECK(t.offload_s > kept.optimizer_s);
    WARN(fmt::format("7B offload on an RTX 4090: device {}, host {}; step {:.2f} s of which offload {:.2f} s",
                     format_bytes(e.memory.peak), format_bytes(e.host_memory.peak), t.step_s, t.offload_s));
}

TEST_CASE("a node's host memory is a limit of its own, and the estimate names the one that binds",
          "[offload][estimate]") {
    const Hardware hw = *find_device("a100-80gb");
    TrialConfig c = llama7b_offload(Offload::optimizer);
    c.world_size = 8;
    EstimateOptions o;
    const Estimate unbounded = estimate(c, hw, o);
    CHECK(unbounded.fits);
    // Eight ranks' host ledgers on one node, against a node that holds a little less.
    o.host_memory = static_cast<std::uint64_t>(static_cast<double>(unbounded.host_node_bytes) / 0.9) - GiB;
    const Estimate tight = estimate(c, hw, o);
    CHECK_FALSE(tight.fits);
    CHECK(tight.limit == "host");
    // Two ranks a node: each node holds two ledgers, and the same host memory suffices.
    o.ranks_per_node = 2;
    const Estimate spread = estimate(c, hw, o);
    CHECK(spread.host_node_bytes == 2 * spread.host_memory.peak);
    CHECK(spread.fits);
    // Both limits passed.
    o.ranks_per_node.reset();
    o.memory_limit = GiB;
    CHECK(estimate(c, hw, o).limit == "device+host");
}

TEST_CASE("tune's engine runs offload's parts in order, the frameworks overlap them", "[offload][estimate]") {
    // Llama-2-7B, ZeRO-2 over 8 ranks of one node, 4 micro-batches: the terms by hand.
    TrialConfig c = llama7b_offload(Offload::optimizer);
    c.world_size = 8, c.grad_accum = 4;
    Hardware hw = *find_device("h100-80gb");
    EstimateOptions o;
    const double owned = static_cast<double>((trained_parameters(c.model, c) + 7) / 8);
    const double link = hw.host_link_bytes_per_s;
    const double d2h = 4 * owned * 2 / link;  // each micro-batch's bf16 gradient shard
    const double cast = owned * 4 / link;     // the fp32 master the device reads back
    const StepTime t = step_time(c.model, c, hw, o);
    const double update = t.offload_s - d2h - cast;  // the host's update: the rest
    CHECK(update > 0);
    o.offload_overlap = true;
    const StepTime overlapped = step_time(c.model, c, hw, o);
    const double backward = overlapped.compute_s * 2 / 3;
    CHECK(overlapped.offload_s == Approx(std::max(0.0, d2h - backward) + std::max(update, owned * 2 / link)));
    CHECK(overlapped.offload_s < t.offload_s);
    // The stacks that offload price their step with the overlap; our engine's estimate does not.
    const FrameworkEstimate ds = framework_estimate(FrameworkProfile::deepspeed, c, hw);
    CHECK(ds.engine.step_s < estimate(c, hw, {}).step_s);
    const FrameworkPredictions p = framework_predictions(c, hw, {}, 1ull << 40);
    CHECK(p.at("deepspeed").step_s == Approx(ds.step_s));
}

TEST_CASE("parameter shards on the host cross the link before their uses", "[offload][estimate]") {
    const Hardware hw = *find_device("h100-80gb");
    TrialConfig c = llama7b_offload(Offload::optimizer);
    c.zero_stage = 3, c.grad_accum = 8;
    const StepTime opt = step_time(c.model, c, hw, {});
    c.offload = Offload::optimizer_params;
    const StepTime params = step_time(c.model, c, hw, {});
    CHECK(params.offload_s >= opt.offload_s);
    // On the CPU backend host and device are one memory: nothing crosses a link.
    const StepTime cpu = step_time(c.model, c, *find_device("cpu"), {});
    CHECK(cpu.offload_s == 0);
    CHECK(cpu.optimizer_s > 0);
}

TEST_CASE("a sweep file's host_memory: a size, auto where the device is detected, unbounded when left out",
          "[offload][spec]") {
    const SweepSpec sized = parse_sweep(
        "[model]\npreset = \"tiny\"\n[hardware]\ndevice = \"a100-80gb\"\nhost_memory = \"1TiB\"\nhost_margin = 0.2\n"
        "[space]\noffload = [\"none\", \"optimizer\"]\n",
        "a.toml");
    CHECK(sized.host_memory == std::uint64_t{1} << 40);
    CHECK(sized.host_margin == 0.2);
    CHECK(sized.space.of("offload").size() == 2);
    const SweepSpec left_out =
        parse_sweep("[model]\npreset = \"tiny\"\n[hardware]\ndevice = \"l40s\"\n[space]\n", "b.toml");
    CHECK_FALSE(left_out.host_memory);
    SweepSpec automatic =
        parse_sweep("[model]\npreset = \"tiny\"\n[hardware]\nhost_memory = \"auto\"\n[space]\n", "c.toml");
    CHECK(automatic.host_memory_auto);
    CHECK_FALSE(automatic.host_memory);
    resolve_auto_device(automatic, std::nullopt, 64 * GiB);
    CHECK(automatic.host_memory == 64 * GiB);
}

TEST_CASE("the exports carry offload where the framework has it and refuse it where it has not", "[offload][exports]") {
    TrialConfig c = llama7b_offload(Offload::optimizer);
    c.model = *find_model("tiny");
    const nlohmann::json ds = nlohmann::json::parse(export_config(Framework::deepspeed, c).body);
    CHECK(ds["zero_optimization"]["offload_optimizer"] == nlohmann::json{{"device", "cpu"}, {"pin_memory", true}});
    CHECK_FALSE(ds["zero_optimization"].contains("offload_param"));
    // FSDP moves parameters, gradients and optimizer states together: no optimizer-only offload.
    for (Framework f : {Framework::accelerate_fsdp, Framework::accelerate_fsdp1, Framework::torchtitan})
        CHECK_THROWS_WITH(export_config(f, c), Catch::Contains("choose optimizer+params"));
    CHECK_THROWS_WITH(export_config(Framework::litgpt, c), Catch::Contains("without cpu_offload"));

    // Its notes name what DeepSpeed keeps on the host beyond our engine, as its profile counts it.
    const auto notes = [](const FrameworkExport& e) {
        std::string all;
        for (const std::string& s : e.memory_added) all += s + "\n";
        return all;
    };
    CHECK_THAT(notes(export_config(Framework::deepspeed, c)), Catch::Contains("the fp32 gradient partition"));

    c.zero_stage = 3, c.offload = Offload::optimizer_params;
    const FrameworkExport e3 = export_config(Framework::deepspeed, c);
    const nlohmann::json ds3 = nlohmann::json::parse(e3.body);
    CHECK(ds3["zero_optimization"]["offload_param"]["device"] == "cpu");
    CHECK_THAT(notes(e3), Catch::Contains("each sub-group's fp32 gradient"));
    CHECK_THAT(export_config(Framework::accelerate_fsdp1, c).body, Catch::Contains("fsdp_offload_params: true"));
    CHECK_THAT(export_config(Framework::torchtitan, c).body, Catch::Contains("enable_cpu_offload = true"));
    c.offload = Offload::none;
    CHECK_THAT(export_config(Framework::accelerate_fsdp1, c).body, Catch::Contains("fsdp_offload_params: false"));
    CHECK_THAT(export_config(Framework::torchtitan, c).body, !Catch::Contains("enable_cpu_offload"));
}

TEST_CASE("offloaded, DeepSpeed's fp32 gradient partition is on the host, not the device", "[offload][frameworks]") {
    TrialConfig c = llama7b_offload(Offload::none);
    c.world_size = 8;
    CHECK(deepspeed_gradient_term(c).bytes > 0);
    c.offload = Offload::optimizer;
    CHECK(deepspeed_gradient_term(c).bytes == 0);
}

TEST_CASE("DeepSpeed's offload keeps more on the host than our engine: fp32 gradients, a 16-bit copy, staging",
          "[offload][frameworks]") {
    TrialConfig c = llama7b_offload(Offload::optimizer);
    c.world_size = 8;
    const Hardware hw = *find_device("a100-80gb");
    const std::uint64_t n = (trained_parameters(c.model, c) + 7) / 8;
    const std::uint64_t largest = 2ull * 32000 * 4096;  // the embedding's gradient in bf16
    // ZeRO-2 (stage_1_and_2.py): fp32 gradients (4 bytes, ours 2), the 16-bit partition, the pinned largest gradient.
    FrameworkEstimate ds = framework_estimate(FrameworkProfile::deepspeed, c, hw);
    CHECK(ds.host == ds.engine.host_memory.peak + 2 * n + 2 * n + largest);
    // The device stages the largest gradient too.
    const FrameworkEstimate none = framework_estimate(FrameworkProfile::deepspeed, llama7b_offload(Offload::none), hw);
    CHECK(std::any_of(ds.terms.begin(), ds.terms.end(), [&](const FrameworkTerm& t) {
        return t.bytes == static_cast<std::int64_t>(largest) && t.alive == kWholeStep;
    }));
    CHECK(none.host == 0);
    // Accumulating, each partition parameter's gradient waits on the host between micro-batches.
    c.grad_accum = 4;
    CHECK(framework_estimate(FrameworkProfile::deepspeed, c, hw).host == ds.host + 2 * n);
    // ZeRO-3 (stage3.py): our 16-bit gradient partition, and each sub-group's pinned fp32 gradient beside it.
    c.grad_accum = 1, c.zero_stage = 3;
    ds = framework_estimate(FrameworkProfile::deepspeed, c, hw);
    CHECK(ds.host == ds.engine.host_memory.peak + 4 * n);
    CHECK(deepspeed_offload_device_term(c).bytes == 0);
    // FSDP's CPU offload holds what ours does, in other dtypes (fp32 parameters and gradients).
    c.offload = Offload::optimizer_params;
    const FrameworkEstimate fsdp = framework_estimate(FrameworkProfile::accelerate_fsdp, c, hw);
    CHECK(fsdp.host == fsdp.engine.host_memory.peak);
    // Each stack's prediction carries its host memory, and so does the stored JSON.
    const FrameworkPredictions p = framework_predictions(c, hw, EstimateOptions{}, 1ull << 40);
    CHECK(p.at("deepspeed").host == framework_estimate(FrameworkProfile::deepspeed, c, hw).host);
    const nlohmann::json j = p.at("deepspeed");
    CHECK(j.at("host").get<std::uint64_t>() == p.at("deepspeed").host);
    CHECK(j.get<FrameworkPrediction>() == p.at("deepspeed"));
}

TEST_CASE("a stack fits only where the node's host memory holds what that stack keeps there", "[offload][frameworks]") {
    // Llama-2-7B on one 24 GB GPU with 128 GB of host memory: our engine's 88 GiB host ledger fits
    // the 107 GiB left after the margin; DeepSpeed's 113 GiB (fp32 gradients, its 16-bit copy) does not.
    const TrialConfig c = llama7b_offload(Offload::optimizer);
    const Hardware hw = *find_device("rtx4090");
    EstimateOptions o;
    o.host_memory = 128'000'000'000ull;
    const Estimate e = estimate(c, hw, o);
    REQUIRE(e.fits);
    const FrameworkPredictions p = framework_predictions(c, hw, o, usable_bytes(c, hw, o), e);
    CHECK(p.at("deepspeed").device < usable_bytes(c, hw, o));
    CHECK(p.at("deepspeed").host > *usable_host_bytes(o.host_memory, o.host_margin));
    CHECK_FALSE(p.at("deepspeed").fits);
    o.host_memory = 160'000'000'000ull;
    CHECK(framework_predictions(c, hw, o, usable_bytes(c, hw, o)).at("deepspeed").fits);
}
