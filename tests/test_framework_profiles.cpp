// The framework profiles (search/frameworks) against hand-computed terms, and
// the three memory views they read out.
#include <catch2/catch.hpp>

#include "core/presets.h"
#include "search/estimate.h"
#include "search/frameworks/framework_profile.h"

using namespace tune;

namespace {

TrialConfig llama7b_lora(std::uint32_t ranks, std::uint32_t zero) {
    TrialConfig c;
    c.model = *find_model("llama-7b");
    c.precision = Precision::bf16;
    c.method = Method::lora;
    c.lora_rank = 8;
    c.micro_batch = 1;
    c.context = 1024;
    c.world_size = ranks;
    c.zero_stage = zero;
    return c;
}

const FrameworkTerm* term(const FrameworkEstimate& e, std::string_view starts) {
    for (const FrameworkTerm& t : e.terms)
        if (t.what.starts_with(starts)) return &t;
    return nullptr;
}

}  // namespace

TEST_CASE("tune's own profile reads the engine's peak in every view", "[frameworks]") {
    const TrialConfig c = llama7b_lora(1, 0);
    const Hardware hw = *find_device("h100-80gb");
    const FrameworkEstimate e = framework_estimate(FrameworkProfile::tune, c, hw);
    CHECK(e.terms.empty());
    CHECK(e.views[MemoryView::device] == e.engine.memory.peak);
    CHECK(e.views[MemoryView::allocated] == e.engine.memory.peak - e.engine.memory[Component::overhead]);
    CHECK(e.views[MemoryView::reserved] == e.views[MemoryView::allocated]);
}

TEST_CASE("transformers' modelling keeps full-vocabulary logits and the decoder's larger saved set", "[frameworks]") {
    const TrialConfig c = llama7b_lora(1, 0);
    const Hardware hw = *find_device("h100-80gb");
    const FrameworkEstimate e = framework_estimate(FrameworkProfile::hf_trainer, c, hw);
    const StepMemory s = step_memory(c.model, c, hw, {});
    // 16-bit logits, their fp32 upcast, log_softmax's fp32 output and the fp32 gradient: 14 bytes a logit,
    // 1024 tokens x 32000, less the chunk our engine holds.
    const FrameworkTerm* logits = term(e, "full-vocabulary logits");
    REQUIRE(logits);
    CHECK(logits->bytes ==
          14 * 1024 * 32000 - static_cast<std::int64_t>(s.at(Phase::head_backward)[Component::logits]));
    CHECK(logits->alive[static_cast<std::size_t>(Phase::head_backward)]);
    CHECK_FALSE(logits->alive[static_cast<std::size_t>(Phase::layer_backward)]);
    // Without checkpointing all 32 layers save 0.7 of our set more.
    const FrameworkTerm* layers = term(e, "the decoder layer's saved tensors");
    REQUIRE(layers);
    const ActivationSizes a = activation_sizes(c.model, c, hw, {});
    CHECK(layers->bytes == static_cast<std::int64_t>(0.7 * static_cast<double>(a.kept_none) * 32));
    CHECK(e.views[MemoryView::allocated] >
          framework_estimate(FrameworkProfile::tune, c, hw).views[MemoryView::allocated]);
    CHECK(e.views[MemoryView::device] - e.views[MemoryView::reserved] == e.engine.memory[Component::overhead]);
}

TEST_CASE("DeepSpeed casts its gradient partition to fp32 in the step, torchtitan hides its collectives",
          "[frameworks]") {
    TrialConfig c = llama7b_lora(8, 1);
    c.method = Method::full;
    c.precision = Precision::bf16_mixed;
    const Hardware hw = *find_device("h100-80gb");
    // ZeRO-1 too: the 16-bit flattened partition and its fp32 cast, 6 bytes a parameter over 8 ranks.
    const FrameworkTerm grads = deepspeed_gradient_term(c);
    CHECK(grads.bytes == 6 * ((6'738'415'616 + 7) / 8));
    CHECK(grads.alive[static_cast<std::size_t>(Phase::optimizer_step)]);
    CHECK_FALSE(grads.alive[static_cast<std::size_t>(Phase::layer_backward)]);
    const FrameworkEstimate ds = framework_estimate(FrameworkProfile::deepspeed, c, hw);
    CHECK(ds.terms.size() == 3);  // transformers' two, and the partition
    c.zero_stage = 0;
    CHECK(deepspeed_gradient_term(c).bytes == 0);
    // ZeRO-3 casts one sub-group (at most 1e9 elements) at a time.
    c.zero_stage = 3;
    c.world_size = 1;
    CHECK(deepspeed_gradient_term(c).bytes == std::int64_t{6} * 1'000'000'000);
    c.world_size = 8;
    c.zero_stage = 3;
    CHECK(framework_estimate(FrameworkProfile::torchtitan, c, hw).engine.step_s <
          framework_estimate(FrameworkProfile::tune, c, hw).engine.step_s);
}

TEST_CASE("LitGPT under FSDP counts the unsharded model its full-state-dict load leaves", "[frameworks]") {
    const Hardware hw = *find_device("a100-40gb");
    const FrameworkEstimate sharded = framework_estimate(FrameworkProfile::litgpt, llama7b_lora(2, 3), hw);
    REQUIRE(sharded.terms.size() == 1);
    CHECK(sharded.terms[0].bytes == 2 * 6'738'415'616);  // bf16
    CHECK(framework_estimate(FrameworkProfile::litgpt, llama7b_lora(1, 0), hw).terms.empty());
}

TEST_CASE("profile and view names parse, unknown ones do not", "[frameworks]") {
    for (std::string_view name : kFrameworkProfileNames) CHECK(to_string(*parse_framework_profile(name)) == name);
    CHECK_FALSE(parse_framework_profile("megatron"));
    CHECK(parse_memory_view("reserved") == MemoryView::reserved);
    CHECK_FALSE(parse_memory_view("rss"));
}

TEST_CASE("HF Trainer's autocast keeps a 16-bit copy of each weight for backward, DeepSpeed's engine does not",
          "[frameworks]") {
    TrialConfig c = llama7b_lora(1, 0);
    c.method = Method::full;
    c.precision = Precision::bf16_mixed;
    const Hardware hw = *find_device("h100-80gb");
    const FrameworkEstimate hf = framework_estimate(FrameworkProfile::hf_trainer, c, hw);
    const FrameworkTerm* copies = term(hf, "autocast's 16-bit weight copies");
    REQUIRE(copies);
    CHECK(copies->bytes ==
          static_cast<std::int64_t>(2 * c.model.layer_params() * 32));  // no checkpointing: all 32 layers
    c.checkpointing = Checkpointing::full;
    CHECK(term(framework_estimate(FrameworkProfile::hf_trainer, c, hw), "autocast's")->bytes ==
          static_cast<std::int64_t>(2 * c.model.layer_params()));  // the recomputed layer only
    CHECK_FALSE(term(framework_estimate(FrameworkProfile::deepspeed, c, hw), "autocast's"));
    c.precision = Precision::bf16;  // pure bf16: no autocast
    CHECK_FALSE(term(framework_estimate(FrameworkProfile::hf_trainer, c, hw), "autocast's"));
}
