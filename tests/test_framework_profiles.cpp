// The framework profiles (estimate/frameworks) against hand-computed terms, and
// the three memory views they read out.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "core/hf_config.h"
#include "core/presets.h"
#include "estimate/estimate.h"
#include "estimate/frameworks/framework_profile.h"
#include "kernels/math/nf4.h"
#include "sweep/spec.h"

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

// llama7b_lora's shapes with another model, method and precision.
TrialConfig variant(std::string_view model, Method method, Precision precision, std::uint32_t ranks,
                    std::uint32_t zero) {
    TrialConfig c = llama7b_lora(ranks, zero);
    c.model = *find_model(model);
    c.method = method;
    c.precision = precision;
    return c;
}

// torchtitan's Llama-3-8B benchmark: 8 ranks, FSDP, bf16-mixed, 2 x 8192 tokens.
TrialConfig torchtitan_llama3_8b() {
    TrialConfig c = variant("llama3-8b", Method::full, Precision::bf16_mixed, 8, 3);
    c.micro_batch = 2;
    c.context = 8192;
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
    // log_softmax's fp32 output, its gradient and the input's, once Trainer.compute_loss has let the
    // outputs' logits go: 12 bytes a logit, 1024 tokens x 32000, less the chunk our engine holds.
    const FrameworkTerm* logits = term(e, "full-vocabulary fp32 log-softmax");
    REQUIRE(logits);
    CHECK(logits->bytes ==
          12 * 1024 * 32000 - static_cast<std::int64_t>(s.at(Phase::head_backward)[Component::logits]));
    CHECK(logits->alive[static_cast<std::size_t>(Phase::head_backward)]);
    CHECK_FALSE(logits->alive[static_cast<std::size_t>(Phase::layer_backward)]);
    // The freed 16-bit logits' block stays reserved beside them (2 bytes a logit).
    REQUIRE(e.cached.size() == 1);
    CHECK(e.cached[0].bytes == 2 * 1024 * 32000);
    // Without checkpointing all 32 layers keep more than ours. LoRA r8 on all seven linears of a frozen bf16
    // Llama-7B, per token: the norms' fp32 inputs and rsqrt 2 x 16,388; SDPA's q, k, v and output 4 x 8192;
    // act_fn's input and output and up's 3 x 22,016; under HF Trainer PEFT's fp32 adapters, each lora_A keeping
    // its own fp32 cast of its input (4 x 35,584) and lora_B lora_A's output (4 x 8 x 7): 274,152 bytes, against
    // our 131,704 (our set and x A^T, 2 x 8 x 7).
    const FrameworkTerm* layers = term(e, "the decoder layer's saved tensors");
    REQUIRE(layers);
    CHECK(layers->bytes == std::int64_t{32} * 1024 * (274'152 - 131'704));
    // DeepSpeed casts the adapters to bf16: q, k, v read one input, gate and up another, each kept once
    // (2 x 23,296 and 2 x 8 x 7): 178,296 bytes. A dropout keeps a byte of mask and a copy per module.
    const auto deepspeed = [&](double dropout) {
        EstimateOptions o;
        o.lora_dropout = dropout;
        return term(framework_estimate(FrameworkProfile::deepspeed, c, hw, o), "the decoder layer's saved")->bytes;
    };
    CHECK(deepspeed(0.0) == std::int64_t{32} * 1024 * (178'296 - 131'704));
    CHECK(deepspeed(0.1) == std::int64_t{32} * 1024 * (178'296 - 2 * 23'296 + 3 * 35'584 - 131'704));
    CHECK(e.views[MemoryView::allocated] >
          framework_estimate(FrameworkProfile::tune, c, hw).views[MemoryView::allocated]);
    CHECK(e.views[MemoryView::device] - e.views[MemoryView::reserved] == e.engine.memory[Component::overhead]);
}

// LlamaDecoderLayer for a full fine-tune of Llama-7B (h = q = kv = 4096, f = 11008), per token, against our
// engine's 131,592 bytes (x, n1, q, k, v, o, x2, n2 at 8192 each, g, u, m at 22,016 each, two rstd):
//   pure bf16: each norm 4h + 4 (the fp32 upcast, rsqrt) + 2h (the normed input the weight's product keeps) + 2h
//   (its output, kept by the next linears); q, k, v, SDPA's output and o_proj's contiguous copy 2 x 4 x 4096;
//   gate's output, act_fn's, up's and the product 4 x 2 x 11008: 194,568, 62,976 more than ours;
//   autocast: the fp32 stream makes each norm's normed input 4h: 210,952, 79,360 more.
TEST_CASE("transformers' decoder layer under a full fine-tune is counted tensor by tensor", "[frameworks]") {
    TrialConfig c = llama7b_lora(1, 0);
    c.method = Method::full;
    const Hardware hw = *find_device("h100-80gb");
    const auto layers = [&](FrameworkProfile f) {
        const FrameworkTerm* t = term(framework_estimate(f, c, hw), "the decoder layer's saved tensors");
        return t ? t->bytes : -1;
    };
    CHECK(transformers_layer_saved_per_token(FrameworkProfile::hf_trainer, c, false, 0.0) == 194'568);
    CHECK(layers(FrameworkProfile::hf_trainer) == std::int64_t{32} * 1024 * 62'976);
    c.precision = Precision::bf16_mixed;  // HF Trainer runs autocast over the fp32 model; DeepSpeed casts it
    CHECK(layers(FrameworkProfile::hf_trainer) == std::int64_t{32} * 1024 * 79'360);
    CHECK(layers(FrameworkProfile::deepspeed) == std::int64_t{32} * 1024 * 62'976);
    c.checkpointing = Checkpointing::full;  // the recomputed layer only
    CHECK(layers(FrameworkProfile::hf_trainer) == std::int64_t{1024} * 79'360);
    // Eager attention keeps the fp32 softmax beside the 16-bit probabilities, and no output of its own.
    c.checkpointing = Checkpointing::none;
    c.precision = Precision::bf16;
    c.attention = Attention::eager;
    const std::int64_t probs = std::int64_t{32} * 1024 * 1024;  // heads x s x s per sequence
    CHECK(layers(FrameworkProfile::hf_trainer) == std::int64_t{32} * (1024 * (62'976 - 2 * 4096) + 4 * probs));
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
    CHECK(ds.terms.size() == 4);  // transformers' two, the partition and the bucket
    // Without ZeRO, FP16_Optimizer casts every gradient to fp32 and flattens the casts: 8 bytes a parameter;
    // an fp32 model runs the bare optimizer.
    c.zero_stage = 0;
    CHECK(deepspeed_gradient_term(c).bytes == std::int64_t{8} * 6'738'415'616);
    CHECK(deepspeed_gradient_term(c).alive == alive_in({Phase::optimizer_step}));
    CHECK(deepspeed_bucket_term(c).bytes == 0);
    c.precision = Precision::fp32;
    CHECK(deepspeed_gradient_term(c).bytes == 0);
    c.precision = Precision::bf16_mixed;
    // ZeRO-3 casts one sub-group (at most 1e9 elements) at a time.
    c.zero_stage = 3;
    c.world_size = 1;
    CHECK(deepspeed_gradient_term(c).bytes == std::int64_t{6} * 1'000'000'000);
    c.world_size = 8;
    c.zero_stage = 3;
    CHECK(framework_estimate(FrameworkProfile::torchtitan, c, hw).engine.step_s <
          framework_estimate(FrameworkProfile::tune, c, hw).engine.step_s);
}

TEST_CASE(
    "DeepSpeed's contiguous gradient bucket: reduce_bucket_size elements, in backward at ZeRO-1 and 2, always at 3",
    "[frameworks]") {
    TrialConfig c = llama7b_lora(8, 2);
    const Hardware hw = *find_device("h100-80gb");
    // 5e8 elements of the 16-bit dtype, whatever the trained parameters (LoRA's too).
    const FrameworkTerm z2 = deepspeed_bucket_term(c);
    CHECK(z2.bytes == std::int64_t{2} * 500'000'000);
    CHECK(z2.alive[static_cast<std::size_t>(Phase::layer_backward)]);
    CHECK_FALSE(z2.alive[static_cast<std::size_t>(Phase::forward)]);
    CHECK_FALSE(z2.alive[static_cast<std::size_t>(Phase::optimizer_step)]);
    c.zero_stage = 3;
    const FrameworkTerm z3 = deepspeed_bucket_term(c);
    CHECK(z3.alive == kWholeStep);
    CHECK_THAT(z3.what, Catch::Contains("whole run"));
    // The profile carries it, and the export's memory notes say the same.
    const FrameworkEstimate ds = framework_estimate(FrameworkProfile::deepspeed, c, hw);
    REQUIRE(term(ds, "ZeRO-3's contiguous gradient bucket"));
    CHECK(ds.views[MemoryView::allocated] >=
          framework_estimate(FrameworkProfile::tune, c, hw).views[MemoryView::allocated] + 1'000'000'000);
    c.precision = Precision::fp32;
    CHECK(deepspeed_bucket_term(c).bytes == std::int64_t{4} * 500'000'000);
}

TEST_CASE(
    "torchtitan keeps the fp32 log-softmax over the vocabulary, and the down projection's output under the op "
    "policy",
    "[frameworks]") {
    TrialConfig c = torchtitan_llama3_8b();
    c.checkpointing = Checkpointing::full;
    const Hardware hw = *find_device("h100-80gb");
    const StepMemory s = step_memory(c.model, c, hw, {});
    const auto terms = torchtitan_terms(c, s);
    REQUIRE(terms.size() == 2);  // and, at ZeRO-3, the last layer kept gathered
    // 12 bytes per logit, 2 x 8192 tokens x 128256, less the chunk our engine holds.
    const std::int64_t chunk = static_cast<std::int64_t>(s.at(Phase::head_backward)[Component::logits]);
    CHECK(terms[0].bytes == std::int64_t{12} * 16384 * 128256 - chunk);
    CHECK(terms[0].alive[static_cast<std::size_t>(Phase::head_backward)]);
    CHECK_FALSE(terms[0].alive[static_cast<std::size_t>(Phase::layer_backward)]);
    // Selective-op: 2 bytes x 16384 tokens x 4096 per layer, 32 layers.
    c.checkpointing = Checkpointing::selective_op;
    const auto op = torchtitan_terms(c, step_memory(c.model, c, hw, {}));
    REQUIRE(op.size() == 3);
    CHECK(op[1].bytes == std::int64_t{2} * 16384 * 4096 * 32);
    // The profile's allocated view carries them: above our engine's own peak.
    const FrameworkEstimate e = framework_estimate(FrameworkProfile::torchtitan, c, hw);
    CHECK(e.views[MemoryView::allocated] >
          framework_estimate(FrameworkProfile::tune, c, hw).views[MemoryView::allocated]);
}

TEST_CASE("the freed 16-bit logits stay reserved beside the fp32 gradient: reserved, not allocated", "[frameworks]") {
    TrialConfig c = torchtitan_llama3_8b();
    c.checkpointing = Checkpointing::selective_op;
    const Hardware hw = *find_device("h100-80gb");
    const FrameworkEstimate e = framework_estimate(FrameworkProfile::torchtitan, c, hw);
    REQUIRE(e.cached.size() == 1);
    // 2 bytes x 16384 tokens x 128256, at the head's backward only.
    const std::int64_t idle = std::int64_t{2} * 16384 * 128256;
    CHECK(e.cached[0].bytes == idle);
    CHECK(e.cached[0].alive[static_cast<std::size_t>(Phase::head_backward)]);
    CHECK_FALSE(e.cached[0].alive[static_cast<std::size_t>(Phase::forward)]);
    // The head's backward is the allocated peak here (the fp32 log-softmax and its gradients).
    CHECK(e.views[MemoryView::reserved] == e.views[MemoryView::allocated] + static_cast<std::uint64_t>(idle));
    CHECK(e.views[MemoryView::device] - e.views[MemoryView::reserved] == e.engine.memory[Component::overhead]);
    // fp32 logits: .float() is the tensor itself, no block idles.
    c.precision = Precision::fp32;
    const FrameworkEstimate fp32 = framework_estimate(FrameworkProfile::torchtitan, c, hw);
    CHECK(fp32.cached.empty());
    CHECK(fp32.views[MemoryView::reserved] == fp32.views[MemoryView::allocated]);
    CHECK(framework_estimate(FrameworkProfile::hf_trainer, c, hw).cached.empty());
    // Trainer drops the outputs' logits before backward under every transformers stack; LitGPT's loop keeps them.
    c.precision = Precision::bf16_mixed;
    for (FrameworkProfile f : {FrameworkProfile::hf_trainer, FrameworkProfile::deepspeed,
                               FrameworkProfile::accelerate_fsdp, FrameworkProfile::torchrun}) {
        INFO(to_string(f));
        const FrameworkEstimate t = framework_estimate(f, c, hw);
        REQUIRE(t.cached.size() == 1);
        CHECK(t.cached[0].bytes == idle);
    }
    CHECK(framework_estimate(FrameworkProfile::litgpt, c, hw).cached.empty());
}

TEST_CASE("LitGPT's layer keeps the fp32 norm inputs, LoRA's dropout and padded output, and the fused qkv output",
          "[frameworks]") {
    TrialConfig c = llama7b_lora(1, 0);
    c.context = 1304;
    c.lora_targets = LoraTargets::qv;
    // Llama-2-7B, LoRA r8 on q and v, bf16, per token: the norms 2 x (4 x 4096 + 4); x A^T 2 x 2 x 8, the shared
    // dropout 3 x 4096, zero_pad's source 2 x (4096 + 4096); q and SDPA's output 2 x 2 x 4096, k 2 x 4096, the qkv
    // output v views 2 x 3 x 4096; silu's input and output and fc_2's output 3 x 2 x 11008.
    CHECK(litgpt_layer_saved_per_token(c, 0.05) == 32776 + 28704 + 49152 + 66048);
    // Grouped KV heads (Llama-3-8B, r16): k and v copied to every query head, the qkv output freed.
    TrialConfig g = c;
    g.model = *find_model("llama3-8b");
    g.lora_rank = 16;
    CHECK(litgpt_layer_saved_per_token(g, 0.05) == 32776 + (64 + 12288 + 2 * (4096 + 1024)) + 4 * 2 * 4096 + 6 * 14336);
    // Full fine-tuning: the norms' fp32 x_normed and 16-bit outputs, and the down projection's input.
    TrialConfig full = c;
    full.method = Method::full;
    CHECK(litgpt_layer_saved_per_token(full, 0.05) == 2 * (10 * 4096 + 4) + 49152 + 4 * 2 * 11008);
    // No dropout (tune's exports): lora_A reads the normed input itself, which it then keeps (2 x 4096) in place of
    // the mask and the copy (3 x 4096).
    CHECK(litgpt_layer_saved_per_token(c, 0.0) == litgpt_layer_saved_per_token(c, 0.05) - 4096);
    // All linears without dropout: also the MLP's normed input once for fc_1 and fc_2, and the gated product for
    // proj; the attention output projection reads SDPA's output, kept already.
    TrialConfig all = c;
    all.lora_targets = LoraTargets::all_linear;
    CHECK(litgpt_layer_saved_per_token(all, 0.0) ==
          32776 + 7 * 2 * 8 + 2 * 4096 + 49152 + 66048 + 2 * 4096 + 2 * 11008);
    // With a dropout each adapted linear keeps its own mask and copy.
    CHECK(litgpt_layer_saved_per_token(all, 0.1) ==
          32776 + 7 * 2 * 8 + 3 * 4096 + 49152 + 66048 + 3 * (4096 + 4096 + 4096 + 11008));

    // The term: every layer's set less our engine's (the attention statistics alike), less the
    // first layer's norm, whose input (the frozen embedding's output) needs no gradient.
    const Hardware hw = *find_device("a100-40gb");
    std::int64_t engine = 0, attention = 0;
    for (const SavedTensor& t : layer_saved_tensors(c.model, c).view()) {
        engine += static_cast<std::int64_t>(t.bytes);
        if (t.name == "attention") attention = static_cast<std::int64_t>(t.bytes);
    }
    const std::int64_t per_layer = 176680LL * 1304 + attention - engine;
    EstimateOptions o;
    o.lora_dropout = 0.05;
    const FrameworkEstimate e = framework_estimate(FrameworkProfile::litgpt, c, hw, o);
    const FrameworkTerm* saved = term(e, "LitGPT's saved tensors");
    REQUIRE(saved);
    CHECK(saved->bytes == 32 * per_layer - (4 * 4096 + 4) * 1304LL);
    CHECK(saved->bytes > 0);
    CHECK(saved->alive[static_cast<std::size_t>(Phase::head_backward)]);
    // Checkpointed blocks: the one recomputed, during the layers' backward.
    c.checkpointing = Checkpointing::full;
    const FrameworkEstimate checkpointed = framework_estimate(FrameworkProfile::litgpt, c, hw, o);
    const FrameworkTerm* one = term(checkpointed, "LitGPT's saved tensors");
    REQUIRE(one);
    CHECK(one->bytes == per_layer);
    CHECK_FALSE(one->alive[static_cast<std::size_t>(Phase::head_backward)]);
    CHECK(one->alive[static_cast<std::size_t>(Phase::layer_backward)]);
}

// torch/distributed/fsdp/_runtime_utils.py: _post_forward_reshard leaves the root unit gathered,
// _pre_backward_hook prefetches the next unit (BACKWARD_PRE). Llama-7B on two ranks: the outer
// buffer (2 x 32000 x 4096 + 4096 elements) and a layer (4 x 4096^2 + 3 x 4096 x 11008 + 2 x 4096),
// both already multiples of 2 x 256, in bf16.
TEST_CASE("FSDP at FULL_SHARD keeps the root unit gathered through the step and prefetches the next layer",
          "[frameworks]") {
    const Hardware hw = *find_device("a100-40gb");
    const FrameworkEstimate e = framework_estimate(FrameworkProfile::accelerate_fsdp, llama7b_lora(2, 3), hw);
    const FrameworkTerm* root = term(e, "the root unit");
    const FrameworkTerm* next = term(e, "the next decoder layer");
    REQUIRE(root);
    REQUIRE(next);
    CHECK(root->bytes == 2 * 262'148'096);
    CHECK(next->bytes == 2 * 202'383'360);
    const auto alive = [](const FrameworkTerm* t, Phase p) { return t->alive[static_cast<std::size_t>(p)]; };
    for (Phase p : {Phase::forward, Phase::layer_backward, Phase::embed_backward}) CHECK(alive(root, p));
    CHECK_FALSE(alive(root, Phase::head_backward));  // our engine gathers it for the head already
    CHECK_FALSE(alive(root, Phase::optimizer_step));
    CHECK(alive(next, Phase::layer_backward));
    CHECK_FALSE(alive(next, Phase::forward));  // fsdp_forward_prefetch is off
    // QLoRA gathers the NF4 storage: the prefetched layer is about a quarter of the bf16 one.
    TrialConfig q = llama7b_lora(2, 3);
    q.method = Method::qlora;
    const FrameworkTerm* nf4 = term(framework_estimate(FrameworkProfile::accelerate_fsdp, q, hw), "the next decoder");
    REQUIRE(nf4);
    CHECK(nf4->bytes < next->bytes / 3);
    // SHARD_GRAD_OP keeps every weight whole (as our engine's ZeRO-2), and other stacks gather as they do.
    CHECK_FALSE(term(framework_estimate(FrameworkProfile::accelerate_fsdp, llama7b_lora(2, 2), hw), "the root unit"));
    CHECK_FALSE(term(framework_estimate(FrameworkProfile::deepspeed, llama7b_lora(2, 3), hw), "the root unit"));
}

TEST_CASE("torchtitan's FSDP2 at ZeRO-3 keeps the root and the last layer gathered into backward, and prefetches",
          "[frameworks]") {
    const Hardware hw = *find_device("h100-80gb");
    TrialConfig c = torchtitan_llama3_8b();
    const auto alive = [](const FrameworkTerm* t, Phase p) { return t->alive[static_cast<std::size_t>(p)]; };
    const FrameworkEstimate e = framework_estimate(FrameworkProfile::torchtitan, c, hw);
    const FrameworkTerm* root = term(e, "the root unit");
    const FrameworkTerm* next = term(e, "the next decoder layer");
    const FrameworkTerm* last = term(e, "the last decoder layer");
    REQUIRE(root);
    REQUIRE(next);
    REQUIRE(last);
    // Llama-3-8B in bf16: the embedding and head (2 x 128256 x 4096) and the final norm; a layer of 218,112,000.
    CHECK(root->bytes == 2 * (2 * 128'256 * 4096 + 4096));
    CHECK(last->bytes == 2 * 218'112'000);
    CHECK(next->bytes == last->bytes);
    CHECK(alive(last, Phase::head_backward));
    CHECK_FALSE(alive(last, Phase::layer_backward));  // by then our engine gathers it too
    CHECK_FALSE(alive(root, Phase::head_backward));
    // The stated 8-GPU run peaks at the head's backward, so the last layer is the term that moves it.
    const ComponentBytes head = step_memory(c.model, c, hw, {}).at(Phase::head_backward);
    std::int64_t at_head = static_cast<std::int64_t>(head.total() - head[Component::overhead]);
    for (const FrameworkTerm& t : e.terms)
        if (alive(&t, Phase::head_backward)) at_head += t.bytes;
    CHECK(static_cast<std::int64_t>(e.views[MemoryView::allocated]) == at_head);
    // With tensor parallelism FSDP gathers each rank's half of the matrices.
    c.tensor_parallel = 2;
    const FrameworkTerm* tp = term(framework_estimate(FrameworkProfile::torchtitan, c, hw), "the last decoder layer");
    REQUIRE(tp);
    CHECK(tp->bytes < last->bytes * 6 / 10);
    // ZeRO-2 (reshard_after_forward never) keeps every layer whole, as our engine's ZeRO-2.
    c.tensor_parallel = 1;
    c.zero_stage = 2;
    const FrameworkEstimate z2 = framework_estimate(FrameworkProfile::torchtitan, c, hw);
    CHECK_FALSE(term(z2, "the root unit"));
    CHECK_FALSE(term(z2, "the last decoder layer"));
}

TEST_CASE("FSDP holds the head's gradient to the root's post-backward, FSDP2 the previous layer's fp32 reduce input",
          "[frameworks]") {
    const Hardware hw = *find_device("h100-80gb");
    TrialConfig c = torchtitan_llama3_8b();
    const FrameworkEstimate titan = framework_estimate(FrameworkProfile::torchtitan, c, hw);
    const FrameworkTerm* head = term(titan, "the head's whole gradient");
    const FrameworkTerm* reduce = term(titan, "the previous layer's fp32 reduce-scatter input");
    REQUIRE(head);
    REQUIRE(reduce);
    CHECK(head->bytes == std::int64_t{2} * 128'256 * 4096);  // bf16, the whole vocabulary on every rank
    CHECK(reduce->bytes == std::int64_t{4} * 218'112'000);   // a Llama-3-8B layer in fp32
    for (const FrameworkTerm* t : {head, reduce}) {
        CHECK(t->alive == alive_in({Phase::layer_backward, Phase::embed_backward}));
    }
    // FSDP1 under accelerate reduce-scatters the flat gradient itself: the head's gradient only.
    const FrameworkEstimate fsdp1 = framework_estimate(FrameworkProfile::accelerate_fsdp, c, hw);
    CHECK(term(fsdp1, "the head's whole gradient"));
    CHECK_FALSE(term(fsdp1, "the previous layer's fp32 reduce-scatter input"));
    // Frozen bases, and NO_SHARD's all-reduce of whole gradients, hold nothing more than our engine.
    c.method = Method::lora;
    CHECK(fsdp_gradient_terms(c, true).empty());
    c.method = Method::full;
    c.zero_stage = 0;
    CHECK(fsdp_gradient_terms(c, true).empty());
    c.zero_stage = 2;  // and SHARD_GRAD_OP's two shard terms
    CHECK(fsdp_gradient_terms(c, true).size() == 4);
}

TEST_CASE("bitsandbytes' quantization state stays whole on each device where ZeRO-3 shards the 4-bit codes",
          "[frameworks]") {
    TrialConfig c = variant("llama-70b", Method::qlora, Precision::bf16_mixed, 2, 3);
    // A Llama-2-70B layer's 855,654,400 weights: one absmax code per 64 (13,369,600 bytes) and one fp32
    // scale per 256 of those (208,900 bytes); 80 layers of it on each rank, where our engine keeps half.
    const double whole = 80.0 * (13'369'600 + 208'900);
    const FrameworkTerm half = bnb_quant_state_term(c);
    CHECK(static_cast<double>(half.bytes) == Approx(whole / 2).epsilon(0.001));
    CHECK(half.alive == kWholeStep);
    // Parameters offloaded: our engine's share moves to the host with the codes, bitsandbytes' stays.
    c.offload = Offload::optimizer_params;
    CHECK(static_cast<double>(bnb_quant_state_term(c).bytes) == Approx(whole).epsilon(0.001));
    const Hardware hw = *find_device("rtx4090");
    for (FrameworkProfile f : {FrameworkProfile::accelerate_fsdp, FrameworkProfile::deepspeed})
        CHECK(term(framework_estimate(f, c, hw), "bitsandbytes' quantization state"));
    // Unsharded codes (ZeRO-2), or no 4-bit base (LoRA): our engine keeps the state as bitsandbytes does.
    c.offload = Offload::none;
    c.zero_stage = 2;
    CHECK(bnb_quant_state_term(c).bytes == 0);
    c.zero_stage = 3;
    c.method = Method::lora;
    CHECK(bnb_quant_state_term(c).bytes == 0);
}

// Llama-2-70B's root unit holds the embedding and the head (2 x 32000 x 8192) and the final norm (8192):
// 524,296,192 weights, two shards of 262,148,096 (a multiple of 256), in bf16 under PEFT's
// sharded QLoRA (the base loaded in 16 bits). A decoder layer's NF4 codes are half a byte per weight of
// its 855,654,400: 213,913,600 bytes a rank, so the root's copy is the largest.
TEST_CASE("FSDP's CPU offload keeps the largest unit's shard copy reserved on its own stream", "[frameworks]") {
    TrialConfig c = variant("llama-70b", Method::qlora, Precision::bf16_mixed, 2, 3);
    c.offload = Offload::optimizer_params;
    const std::vector<FrameworkTerm> root = fsdp_offload_cached_terms(c, false);
    REQUIRE(root.size() == 1);
    CHECK(root[0].bytes == 2 * 262'148'096);
    CHECK(root[0].alive == kWholeStep);
    // An fp32 model's shards (an fp32 base under accelerate, torchtitan's): 4 bytes a weight.
    CHECK(fsdp_offload_cached_terms(c, true)[0].bytes == 4 * 262'148'096);
    // Reserved, not allocated: the copy dies once its all-gather has it.
    const Hardware hw = *find_device("rtx4090");
    EstimateOptions o;
    o.base_dtype = BaseDtype::half;
    const FrameworkEstimate e = framework_estimate(FrameworkProfile::accelerate_fsdp, c, hw, o);
    bool cached = false;
    for (const FrameworkTerm& t : e.cached) cached = cached || t.bytes == 2 * 262'148'096;
    CHECK(cached);
    CHECK(e.views[MemoryView::reserved] >= e.views[MemoryView::allocated] + 2 * 262'148'096);
    // Without offload nothing is copied from the host.
    c.offload = Offload::none;
    CHECK(fsdp_offload_cached_terms(c, false).empty());
}

// DeepSpeed's partitioned_param_coordinator.py prefetches stage3_prefetch_bucket_size (5e7) elements, the
// last tensor whole, beside the gathered layer in backward; parameter_offload.py keeps every tensor of at most
// stage3_param_persistence_threshold (1e5) elements whole. Llama-7B, LoRA r=8 on q, k, v, o, two ranks:
// the persistent tensors are each layer's two norms (2 x 4096) and eight adapter factors (8 x 4096 each),
// and the final norm.
TEST_CASE("DeepSpeed's ZeRO-3 prefetches beside the gathered layer and keeps its small tensors whole", "[frameworks]") {
    const Hardware hw = *find_device("a100-40gb");
    TrialConfig c = llama7b_lora(2, 3);
    c.lora_targets = LoraTargets::attention;
    const FrameworkEstimate e = framework_estimate(FrameworkProfile::deepspeed, c, hw);
    const FrameworkTerm* ahead = term(e, "ZeRO-3's prefetched parameters");
    const FrameworkTerm* small = term(e, "ZeRO-3's persistent small tensors");
    REQUIRE(ahead);
    REQUIRE(small);
    CHECK(ahead->bytes == 2 * 50'000'000);  // no tensor of the layer is larger (11008 x 4096)
    const std::int64_t persistent = 32 * (2 * 4096 + 8 * 8 * 4096) + 4096;
    CHECK(small->bytes == 2 * (persistent - persistent / 2));
    CHECK_FALSE(ahead->alive[static_cast<std::size_t>(Phase::forward)]);
    CHECK(ahead->alive[static_cast<std::size_t>(Phase::layer_backward)]);
    // Llama-2-70B under QLoRA: the down projection's packed storage (28672 x 8192 / 4) outgrows the bucket.
    TrialConfig q = c;
    q.model = *find_model("llama-70b");
    q.method = Method::qlora;
    const FrameworkTerm* nf4 = term(framework_estimate(FrameworkProfile::deepspeed, q, hw), "ZeRO-3's prefetched");
    REQUIRE(nf4);
    CHECK(nf4->bytes == 2 * (28672 * 8192 / 4));
    // Below stage 3 nothing is partitioned or gathered.
    CHECK_FALSE(term(framework_estimate(FrameworkProfile::deepspeed, llama7b_lora(2, 2), hw), "ZeRO-3's"));
}

TEST_CASE("LitGPT under FSDP counts the unsharded model its full-state-dict load leaves", "[frameworks]") {
    const Hardware hw = *find_device("a100-40gb");
    const FrameworkEstimate sharded = framework_estimate(FrameworkProfile::litgpt, llama7b_lora(2, 3), hw);
    const FrameworkTerm* model = term(sharded, "the unsharded model");
    REQUIRE(model);
    CHECK(model->bytes == 2 * 6'738'415'616);  // bf16
    const FrameworkEstimate single = framework_estimate(FrameworkProfile::litgpt, llama7b_lora(1, 0), hw);
    CHECK_FALSE(term(single, "the unsharded model"));
}

TEST_CASE(
    "LitGPT keeps the whole sequence's logits in fp32 through the step, and the previous step's into the next "
    "forward",
    "[frameworks]") {
    const Hardware hw = *find_device("a100-40gb");
    TrialConfig c = llama7b_lora(1, 0);
    c.context = 1304;
    const StepMemory s = step_memory(c.model, c, hw, {});
    const std::int64_t engine_chunk = static_cast<std::int64_t>(s.at(Phase::head_backward)[Component::logits]);
    const std::int64_t logits = 1304LL * 32000;
    // End of forward: the previous step's fp32 list, this step's bf16 list and its fp32 copy (10 bytes a
    // logit) beat the head's backward: the fp32 list, the fp32 log-softmax outputs and one 128-token
    // chunk's fp32, fp32 and bf16 gradients (8 a logit + 10 x 128 x 32000).
    CHECK(10 * logits > 8 * logits + 10 * 128 * 32000);
    const FrameworkEstimate long_sequence = framework_estimate(FrameworkProfile::litgpt, c, hw);
    const FrameworkTerm* lora = term(long_sequence, "fp32 logits");
    REQUIRE(lora);
    CHECK(lora->bytes == 10 * logits - engine_chunk);
    CHECK_THAT(lora->what, Catch::Contains("end of forward"));
    CHECK(lora->alive[static_cast<std::size_t>(Phase::head_backward)]);
    // Two sequences of 128 tokens: the chunk is the whole batch, and the head's backward is the larger moment.
    c.context = 128;
    c.micro_batch = 2;
    const StepMemory small = step_memory(c.model, c, hw, {});
    const FrameworkEstimate short_sequences = framework_estimate(FrameworkProfile::litgpt, c, hw);
    const FrameworkTerm* head = term(short_sequences, "fp32 logits");
    REQUIRE(head);
    CHECK(head->bytes ==
          (8 + 10) * 256LL * 32000 - static_cast<std::int64_t>(small.at(Phase::head_backward)[Component::logits]));
    CHECK_THAT(head->what, Catch::Contains("head's backward"));
    // A full fine-tune (finetune/full.py) runs the head whole: at its backward the fp32 logits, every
    // chunk's fp32 gradient and their concatenation (12 bytes a logit) beat the end of forward.
    c.method = Method::full;
    c.context = 1304;
    c.micro_batch = 1;
    const StepMemory full_memory = step_memory(c.model, c, hw, {});
    const FrameworkTerm* whole = term(framework_estimate(FrameworkProfile::litgpt, c, hw), "fp32 logits");
    REQUIRE(whole);
    CHECK(whole->bytes ==
          12 * logits - static_cast<std::int64_t>(full_memory.at(Phase::head_backward)[Component::logits]));
    CHECK_THAT(whole->what, Catch::Contains("head's backward"));
}

TEST_CASE("bitsandbytes before 0.43.2 keeps each 4-bit linear's input, under LitGPT into the next step",
          "[frameworks]") {
    const Hardware hw = *find_device("a100-40gb");
    TrialConfig c = llama7b_lora(1, 0);
    c.method = Method::qlora;
    c.context = 1304;
    EstimateOptions o;
    // Unset (a current release) and 0.43.2 keep nothing.
    const KeptInputs litgpt_loop{.held_to_next_step = true, .attention_output_copied = false};
    CHECK(bnb_kept_inputs(c, o.libraries, litgpt_loop).bytes == 0);
    o.libraries.bitsandbytes = Version{0, 43, 2};
    CHECK(bnb_kept_inputs(c, o.libraries, litgpt_loop).bytes == 0);
    o.libraries.bitsandbytes = Version{0, 41, 1};
    // Per layer the two normed inputs, the attention output (transformers copies it
    // out of SDPA's layout) and the gated product, in bf16: 32 x 1304 x 2 x (3 x 4096 + 11008).
    const std::int64_t all_layers = 32LL * 1304 * 2 * (3 * 4096 + 11008);
    const FrameworkTerm trainer = bnb_kept_inputs(c, o.libraries, {});
    CHECK(trainer.bytes == all_layers);
    // LitGPT's output projection reads a view of SDPA's output: nothing new kept there.
    const FrameworkTerm litgpt = bnb_kept_inputs(c, o.libraries, litgpt_loop);
    CHECK(litgpt.bytes == all_layers - 32LL * 1304 * 2 * 4096);
    CHECK_THAT(litgpt.what, Catch::Contains("bitsandbytes 0.41.1"));
    CHECK(litgpt.alive == kWholeStep);
    CHECK_FALSE(trainer.alive[static_cast<std::size_t>(Phase::optimizer_step)]);
    CHECK(trainer.alive[static_cast<std::size_t>(Phase::layer_backward)]);
    c.checkpointing = Checkpointing::full;  // only the layer being recomputed holds them
    CHECK(bnb_kept_inputs(c, o.libraries, {}).bytes == all_layers / 32);
    c.checkpointing = Checkpointing::none;
    c.method = Method::lora;  // 16-bit frozen weights: PyTorch keeps no input for them
    CHECK(bnb_kept_inputs(c, o.libraries, litgpt_loop).bytes == 0);

    // LitGPT: the kept inputs, and the head quantized too: NF4 storage, and two 16-bit copies when dequantized.
    c.method = Method::qlora;
    const FrameworkEstimate e = framework_estimate(FrameworkProfile::litgpt, c, hw, o);
    REQUIRE(term(e, "bitsandbytes 0.41.1"));
    const FrameworkTerm* stored = term(e, "the LM head in NF4");
    const FrameworkTerm* copies = term(e, "the LM head dequantized");
    REQUIRE(stored);
    REQUIRE(copies);
    const std::int64_t head = 32000LL * 4096;
    CHECK(stored->bytes == math::nf4_sizes(head).bytes - 2 * head);
    CHECK(copies->bytes == 4 * head - 2 * 11008LL * 4096);
    // The previous step's kept inputs join the end-of-forward moment.
    const StepMemory s = step_memory(c.model, c, hw, o);
    const FrameworkTerm* logits = term(e, "fp32 logits");
    REQUIRE(logits);
    CHECK(logits->bytes == 10 * 1304LL * 32000 + litgpt.bytes -
                               static_cast<std::int64_t>(s.at(Phase::head_backward)[Component::logits]));
    // Hugging Face's stack quantizes no head and lets the graph go before the step.
    const FrameworkEstimate hf = framework_estimate(FrameworkProfile::hf_trainer, c, hw, o);
    REQUIRE(term(hf, "bitsandbytes 0.41.1"));
    CHECK_FALSE(term(hf, "the LM head in NF4"));
}

TEST_CASE("library versions parse as pip writes them, and nothing else does", "[frameworks]") {
    CHECK(parse_version("0.43.1") == Version{0, 43, 1});
    CHECK(parse_version("0.42") == Version{0, 42, 0});
    CHECK(parse_version("1") == Version{1, 0, 0});
    CHECK(Version{0, 43, 1} < Version{0, 43, 2});
    CHECK(Version{0, 9, 9} < Version{0, 43, 0});
    for (const char* bad : {"", "0.43.1rc1", "0.43.", ".43", "a.b", "-1.0", "1.2.3.4", "0..1", " 0.43.1"}) {
        INFO(bad);
        CHECK_FALSE(parse_version(bad));
    }
    CHECK(to_string(Version{0, 43, 1}) == "0.43.1");
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
    // A frozen fp32 base under autocast keeps its copies too (the cast cache holds only weights that require
    // grad); bitsandbytes' 4-bit linears keep none.
    c.precision = Precision::bf16_mixed;
    c.method = Method::lora;
    const FrameworkEstimate lora = framework_estimate(FrameworkProfile::hf_trainer, c, hw);
    CHECK(term(lora, "autocast's")->bytes == static_cast<std::int64_t>(2 * c.model.layer_params()));
    // Each lora_A call casts its fp32 input to bf16 and keeps that copy: 2 x 35,584 a token for the seven
    // linears' inputs, and lora_A's outputs, 2 x 8 x 7, where our engine keeps x A^T alone.
    c.checkpointing = Checkpointing::none;
    CHECK(term(framework_estimate(FrameworkProfile::hf_trainer, c, hw), "the decoder layer's saved")->bytes ==
          std::int64_t{32} * 1024 * (202'872 - 131'704));
    c.method = Method::qlora;
    CHECK_FALSE(term(framework_estimate(FrameworkProfile::hf_trainer, c, hw), "autocast's"));
}

TEST_CASE("torch.optim.AdamW's foreach step holds a second moment's square roots where the stack runs it",
          "[frameworks]") {
    // Llama-3.2-1B, full fine-tune, bf16-mixed, one short micro-batch: the optimizer step is HF Trainer's peak.
    TrialConfig c = variant("llama3.2-1b", Method::full, Precision::bf16_mixed, 1, 0);
    c.context = 512;
    const Hardware hw = *find_device("h100-80gb");
    const std::int64_t params = static_cast<std::int64_t>(c.model.param_count());
    // fp32 moments under autocast: 4 bytes a parameter, each flat buffer padded to 256 elements.
    const FrameworkTerm sqrt = foreach_adamw_term(FrameworkProfile::hf_trainer, c);
    CHECK(sqrt.bytes >= 4 * params);
    CHECK(sqrt.bytes < 4 * (params + 256 * static_cast<std::int64_t>(c.model.layers + 1)));
    CHECK(sqrt.alive == alive_in({Phase::optimizer_step}));
    CHECK(foreach_adamw_term(FrameworkProfile::torchrun, c).bytes == sqrt.bytes);
    const FrameworkEstimate hf = framework_estimate(FrameworkProfile::hf_trainer, c, hw);
    REQUIRE(term(hf, "torch.optim.AdamW's foreach step"));
    const ComponentBytes step = step_memory(c.model, c, hw, {}).at(Phase::optimizer_step);
    CHECK(hf.views[MemoryView::allocated] ==
          step.total() - step[Component::overhead] + static_cast<std::uint64_t>(sqrt.bytes));
    // Pure bf16 keeps bf16 moments: 2 bytes a parameter.
    c.precision = Precision::bf16;
    CHECK(foreach_adamw_term(FrameworkProfile::hf_trainer, c).bytes * 2 == sqrt.bytes);
    c.precision = Precision::bf16_mixed;
    // FSDP shards the moments, and so the square roots (FSDP2's DTensors take foreach too).
    c.world_size = 8;
    c.zero_stage = 3;
    const std::int64_t shard = foreach_adamw_term(FrameworkProfile::accelerate_fsdp, c).bytes;
    CHECK(shard >= sqrt.bytes / 8);
    CHECK(shard < sqrt.bytes / 8 + 4 * 8 * 256 * static_cast<std::int64_t>(c.model.layers + 1));
    // DeepSpeed's FusedAdam updates in place: the DeepSpeed stack, and HF Trainer through its ds_config.
    CHECK(foreach_adamw_term(FrameworkProfile::deepspeed, c).bytes == 0);
    CHECK(foreach_adamw_term(FrameworkProfile::hf_trainer, c).bytes == 0);
    CHECK(foreach_adamw_term(FrameworkProfile::tune, c).bytes == 0);
    // Offloaded states are updated on the CPU; other optimizers have no foreach square roots.
    c.offload = Offload::optimizer_params;
    CHECK(foreach_adamw_term(FrameworkProfile::accelerate_fsdp, c).bytes == 0);
    c.offload = Offload::none;
    c.optimizer = Optimizer::lion;
    CHECK(foreach_adamw_term(FrameworkProfile::accelerate_fsdp, c).bytes == 0);
}

TEST_CASE("each stack refuses what it cannot run, with its reason, and our engine refuses nothing here",
          "[frameworks]") {
    TrialConfig lomo = llama7b_lora(8, 2);
    lomo.method = Method::full;
    lomo.optimizer = Optimizer::lomo;
    // LOMO under DeepSpeed (the Trainer's route to ZeRO 1-3): a TypeError in Accelerator.backward.
    for (FrameworkProfile f : {FrameworkProfile::deepspeed, FrameworkProfile::hf_trainer, FrameworkProfile::torchrun})
        CHECK_THAT(framework_problem(f, lomo).value_or(""), Catch::Contains("LOMO under DeepSpeed (ZeRO-2)"));
    CHECK_FALSE(framework_problem(FrameworkProfile::tune, lomo));
    // At ZeRO-0 DeepSpeed's engine still runs the deepspeed stack; HF Trainer and torchrun run DDP.
    lomo.zero_stage = 0;
    CHECK_THAT(framework_problem(FrameworkProfile::deepspeed, lomo).value_or(""),
               Catch::Contains("LOMO under DeepSpeed (ZeRO-0)"));
    CHECK_FALSE(framework_problem(FrameworkProfile::hf_trainer, lomo));
    CHECK_FALSE(framework_problem(FrameworkProfile::torchrun, lomo));
    lomo.precision = Precision::fp16_mixed;
    CHECK_THAT(framework_problem(FrameworkProfile::accelerate_fsdp, lomo).value_or(""), Catch::Contains("GradScaler"));

    TrialConfig z1 = llama7b_lora(8, 1);
    CHECK_THAT(framework_problem(FrameworkProfile::accelerate_fsdp, z1).value_or(""), Catch::Contains("ZeRO-1"));
    CHECK_THAT(framework_problem(FrameworkProfile::litgpt, z1).value_or(""), Catch::Contains("FSDP"));
    CHECK_FALSE(framework_problem(FrameworkProfile::deepspeed, z1));

    // torchtitan: Adam/AdamW only, every parameter trained, fp32 sharded masters, no loss scaling.
    TrialConfig titan = llama7b_lora(8, 3);
    titan.method = Method::full;
    titan.precision = Precision::bf16_mixed;
    CHECK_FALSE(framework_problem(FrameworkProfile::torchtitan, titan));
    titan.precision = Precision::bf16;
    CHECK_THAT(framework_problem(FrameworkProfile::torchtitan, titan).value_or(""), Catch::Contains("pure bf16"));
    titan.precision = Precision::bf16_mixed;
    titan.optimizer = Optimizer::lion;
    CHECK_THAT(framework_problem(FrameworkProfile::torchtitan, titan).value_or(""), Catch::Contains("AdamW only"));
    CHECK_THAT(framework_problem(FrameworkProfile::litgpt, titan).value_or(""), Catch::Contains("lion under LitGPT"));
    titan.optimizer = Optimizer::adamw;
    titan.method = Method::lora;
    CHECK_THAT(framework_problem(FrameworkProfile::torchtitan, titan).value_or(""), Catch::Contains("no adapters"));

    // Op-level selective checkpointing: torchtitan's alone; the others checkpoint whole layers.
    titan.method = Method::full;
    titan.checkpointing = Checkpointing::selective_op;
    CHECK_FALSE(framework_problem(FrameworkProfile::torchtitan, titan));
    CHECK_FALSE(framework_problem(FrameworkProfile::tune, titan));
    for (FrameworkProfile f : {FrameworkProfile::hf_trainer, FrameworkProfile::torchrun, FrameworkProfile::deepspeed,
                               FrameworkProfile::accelerate_fsdp, FrameworkProfile::litgpt})
        CHECK_THAT(framework_problem(f, titan).value_or(""), Catch::Contains("whole decoder layers"));
}

TEST_CASE("framework predictions carry every stack's views, fits against the limit, and the invalid ones' reasons",
          "[frameworks]") {
    TrialConfig c = llama7b_lora(8, 1);
    const Hardware hw = *find_device("h100-80gb");
    const EstimateOptions o;
    const FrameworkPredictions p = framework_predictions(c, hw, o, hw.memory_bytes);
    CHECK(p.size() == kFrameworkProfileNames.size() - 1);
    CHECK_FALSE(p.contains("tune"));
    // ZeRO-1 under FSDP: refused with the reason, no numbers.
    CHECK_THAT(p.at("accelerate-fsdp").invalid, Catch::Contains("ZeRO-1"));
    CHECK(p.at("accelerate-fsdp").device == 0);
    // Each valid prediction is the profile's own estimate, read out.
    for (FrameworkProfile f : {FrameworkProfile::hf_trainer, FrameworkProfile::deepspeed, FrameworkProfile::torchrun}) {
        const FrameworkEstimate e = framework_estimate(f, c, hw, o);
        const FrameworkPrediction& q = p.at(std::string(to_string(f)));
        CHECK(q.invalid.empty());
        CHECK(q.device == e.views[MemoryView::device]);
        CHECK(q.allocated == e.views[MemoryView::allocated]);
        CHECK(q.reserved == e.views[MemoryView::reserved]);
        CHECK(q.step_s == Approx(e.step_s));
        CHECK(q.tokens_per_s == Approx(e.tokens_per_s));
        CHECK(q.fits == (q.device <= hw.memory_bytes));
    }
    // A full fine-tune at ZeRO-3: DeepSpeed adds its flattened gradient partition.
    c.method = Method::full;
    c.precision = Precision::bf16_mixed;
    c.zero_stage = 3;
    const FrameworkPredictions full = framework_predictions(c, hw, o, hw.memory_bytes);
    // HF Trainer at ZeRO-3 runs DeepSpeed's engine: the same prediction.
    CHECK(full.at("hf-trainer").device == full.at("deepspeed").device);
    // A limit between two stacks' device views splits them.
    const std::uint64_t fsdp = full.at("accelerate-fsdp").device, ds = full.at("deepspeed").device;
    REQUIRE(fsdp != ds);
    const std::uint64_t between = (fsdp + ds) / 2;
    const FrameworkPredictions tight = framework_predictions(c, hw, o, between);
    CHECK(tight.at("accelerate-fsdp").fits == (fsdp < ds));
    CHECK(tight.at("deepspeed").fits == (ds < fsdp));
    // torchtitan overlaps its collectives: our engine's step priced with its options is never slower.
    const FrameworkEstimate titan = framework_estimate(FrameworkProfile::torchtitan, c, hw, o);
    CHECK(full.at("torchtitan").step_s == Approx(titan.step_s));
    CHECK(titan.engine.step_s < estimate(c, hw, o).step_s);
}

TEST_CASE("framework predictions round-trip through their stored JSON, and a damaged column reads as none",
          "[frameworks]") {
    FrameworkPredictions p;
    p["hf-trainer"] = {1, 2, 3, 0, 0.5, 1000.0, true, ""};
    p["deepspeed"].invalid = "LOMO under DeepSpeed (ZeRO-2)";
    const std::string text = nlohmann::json(p).dump();
    CHECK(parse_framework_predictions(text) == p);
    CHECK_FALSE(parse_framework_predictions("{\"hf-trainer\": {\"device\": 1}"));
    CHECK_FALSE(parse_framework_predictions("[1, 2]"));
    CHECK_FALSE(parse_framework_predictions("{\"hf-trainer\": {\"device\": \"x\"}}"));
}

TEST_CASE("every published run's configuration is one its stack can run: the validity rules refuse no real run",
          "[frameworks]") {
    const std::filesystem::path fixtures = std::filesystem::path(TUNE_SOURCE_DIR) / "tests" / "fixtures";
    std::ifstream in(fixtures / "published" / "published_runs.json");
    const nlohmann::json runs = nlohmann::json::parse(in);
    int checked = 0;
    for (const nlohmann::json& point : runs["points"]) {
        if (!point.contains("tune")) continue;
        const nlohmann::json& t = point["tune"];
        const auto profile = parse_framework_profile(t["framework"].get<std::string>());
        REQUIRE(profile);
        TrialConfig c = t["config"].get<TrialConfig>();
        const std::string model = t["model"].get<std::string>();
        c.model = model.starts_with("hf:") ? load_hf_config(fixtures / "hf" / model.substr(3) / "config.json")
                                           : *find_model(model);
        c.world_size = t["gpus"].get<std::uint32_t>();
        INFO(point["id"].get<std::string>() << " under " << to_string(*profile));
        CHECK(framework_problem(*profile, c).value_or("") == "");
        ++checked;
    }
    CHECK(checked >= 35);
}

TEST_CASE("HF Trainer and torchrun at ZeRO 1-3 run DeepSpeed's engine and accelerate's FSDP2 at ZeRO-0 runs DDP",
          "[frameworks]") {
    TrialConfig c = variant("llama-7b", Method::full, Precision::bf16_mixed, 8, 2);
    const Hardware hw = *find_device("h100-80gb");
    const FrameworkEstimate ds = framework_estimate(FrameworkProfile::deepspeed, c, hw);
    for (FrameworkProfile f : {FrameworkProfile::hf_trainer, FrameworkProfile::torchrun}) {
        const FrameworkEstimate e = framework_estimate(f, c, hw);
        CHECK(e.views.bytes == ds.views.bytes);
        CHECK(e.step_s == Approx(ds.step_s));
        CHECK(term(e, "ZeRO-2's flattened gradient partition"));
        CHECK_FALSE(term(e, "autocast's"));  // DeepSpeed casts the module; no autocast over fp32
    }
    c.zero_stage = 0;
    CHECK(stack_rules(FrameworkProfile::hf_trainer, c) == FrameworkProfile::hf_trainer);
    CHECK(stack_rules(FrameworkProfile::accelerate_fsdp, c) == FrameworkProfile::hf_trainer);
    CHECK(framework_estimate(FrameworkProfile::accelerate_fsdp, c, hw).views.bytes ==
          framework_estimate(FrameworkProfile::hf_trainer, c, hw).views.bytes);
    c.zero_stage = 3;
    CHECK(stack_rules(FrameworkProfile::accelerate_fsdp, c) == FrameworkProfile::accelerate_fsdp);
}

TEST_CASE("an adapter model's frozen base loaded in fp32 costs 2 bytes a weight where the stack keeps it",
          "[frameworks]") {
    // Llama-7B: 32 layers of 202,383,360 elements and 262,148,096 outside them (both multiples of 256).
    TrialConfig c = variant("llama-7b", Method::lora, Precision::bf16_mixed, 1, 0);
    const Hardware hw = *find_device("h100-80gb");
    const std::int64_t base = 32 * std::int64_t{202'383'360} + 262'148'096;
    REQUIRE(base == static_cast<std::int64_t>(c.model.param_count()));
    const FrameworkEstimate hf = framework_estimate(FrameworkProfile::hf_trainer, c, hw);
    REQUIRE(term(hf, "the frozen base in fp32"));
    CHECK(term(hf, "the frozen base in fp32")->bytes == 2 * base);
    CHECK(term(hf, "autocast's"));
    // Loaded in bf16: no fp32 base, autocast's casts are no-ops, the stream is 16-bit.
    EstimateOptions half;
    half.base_dtype = BaseDtype::half;
    const FrameworkEstimate hf16 = framework_estimate(FrameworkProfile::hf_trainer, c, hw, half);
    CHECK_FALSE(term(hf16, "the frozen base in fp32"));
    CHECK_FALSE(term(hf16, "autocast's"));
    CHECK(hf16.views[MemoryView::allocated] < hf.views[MemoryView::allocated] - 2 * base);
    // FSDP at FULL_SHARD, 8 ranks: each FlatParameter's fp32 shard, 2 bytes over our engine's 16-bit one.
    c.world_size = 8;
    c.zero_stage = 3;
    const std::int64_t shard = 32 * std::int64_t{25'297'920} + 32'768'512;  // ceil(n / 8) to 256 elements
    const FrameworkEstimate fsdp = framework_estimate(FrameworkProfile::accelerate_fsdp, c, hw);
    REQUIRE(term(fsdp, "the frozen base in fp32"));
    CHECK(term(fsdp, "the frozen base in fp32")->bytes == 2 * shard);
    CHECK_FALSE(term(framework_estimate(FrameworkProfile::accelerate_fsdp, c, hw, half), "the frozen base"));
    // DeepSpeed casts the module to bf16 whatever it was loaded in.
    CHECK_FALSE(term(framework_estimate(FrameworkProfile::deepspeed, c, hw), "the frozen base"));
    // Pure bf16 and fp32 hold the base as our engine does.
    c.precision = Precision::bf16;
    CHECK_FALSE(term(framework_estimate(FrameworkProfile::accelerate_fsdp, c, hw), "the frozen base"));
    // Unsharded QLoRA: prepare_model_for_kbit_training upcasts the embedding, head and norms
    // (262,148,096 + 32 x 8,192 elements) whatever the load dtype; FSDP keeps them as loaded.
    c = variant("llama-7b", Method::qlora, Precision::bf16_mixed, 1, 0);
    const std::int64_t unquantized = 262'148'096 + 32 * std::int64_t{8'192};  // two norms of 4,096
    for (const EstimateOptions& o : {EstimateOptions{}, half})
        CHECK(term(framework_estimate(FrameworkProfile::hf_trainer, c, hw, o), "the frozen base in fp32")->bytes ==
              2 * unquantized);
}

TEST_CASE("DDP under HF Trainer keeps a bucket copy of every trainable gradient in the parameters' dtype",
          "[frameworks]") {
    TrialConfig c = variant("llama3.2-1b", Method::full, Precision::bf16_mixed, 2, 0);
    const Hardware hw = *find_device("h100-80gb");
    const auto params = static_cast<std::int64_t>(c.model.param_count());
    const FrameworkTerm* bucket = term(framework_estimate(FrameworkProfile::hf_trainer, c, hw), "DDP's gradient");
    REQUIRE(bucket);
    CHECK(bucket->bytes == 4 * params);  // fp32 parameters under autocast
    CHECK(bucket->alive == kWholeStep);
    c.precision = Precision::bf16;
    CHECK(term(framework_estimate(FrameworkProfile::torchrun, c, hw), "DDP's gradient")->bytes == 2 * params);
    // LoRA: the fp32 adapters alone (r 8 on all seven linears of 16 layers of Llama-3.2-1B).
    c.method = Method::lora;
    // Per layer: q and o 8 x (2,048 + 2,048), k and v 8 x (2,048 + 512), gate, up and down 8 x (2,048 + 8,192).
    REQUIRE(c.lora_targets == LoraTargets::all_linear);
    const std::int64_t adapters = 16 * (2 * 32'768 + 2 * 20'480 + 3 * 81'920);
    CHECK(term(framework_estimate(FrameworkProfile::hf_trainer, c, hw), "DDP's gradient")->bytes == 4 * adapters);
    // One rank has no DDP; DeepSpeed (ZeRO 1-3) has its own buckets.
    c.world_size = 1;
    CHECK_FALSE(term(framework_estimate(FrameworkProfile::hf_trainer, c, hw), "DDP's gradient"));
    c.world_size = 2;
    c.zero_stage = 2;
    CHECK_FALSE(term(framework_estimate(FrameworkProfile::hf_trainer, c, hw), "DDP's gradient"));
}

TEST_CASE("FSDP's SHARD_GRAD_OP keeps fp32 gradient shards and frees the gathered weights for the optimizer step",
          "[frameworks]") {
    // Llama-3.2-1B on 2 ranks: 16 layers of 60,821,504 elements and 262,670,336 outside (tied head), each
    // rank's shard half of 1,235,814,400 (every half a multiple of 256).
    TrialConfig c = variant("llama3.2-1b", Method::full, Precision::bf16_mixed, 2, 2);
    const Hardware hw = *find_device("h100-80gb");
    const std::int64_t params = 1'235'814'400, shard = params / 2;
    REQUIRE(static_cast<std::int64_t>(c.model.param_count()) == params);
    const FrameworkEstimate e = framework_estimate(FrameworkProfile::accelerate_fsdp, c, hw);
    REQUIRE(term(e, "SHARD_GRAD_OP's fp32 gradient shards"));
    CHECK(term(e, "SHARD_GRAD_OP's fp32 gradient shards")->bytes == 2 * shard);
    const FrameworkTerm* freed = term(e, "SHARD_GRAD_OP's gathered weights");
    REQUIRE(freed);
    CHECK(freed->bytes == -2 * params);
    CHECK(freed->alive == alive_in({Phase::optimizer_step}));
    // fp32: no master in our engine, so the fp32 shard itself is the extra.
    c.precision = Precision::fp32;
    CHECK(
        term(framework_estimate(FrameworkProfile::accelerate_fsdp, c, hw), "SHARD_GRAD_OP's parameter shards")->bytes ==
        4 * shard);
    // FULL_SHARD evens out: the fp32 shard and gradient stand for our engine's 16-bit shard, master and gradient.
    c.precision = Precision::bf16_mixed;
    c.zero_stage = 3;
    CHECK_FALSE(term(framework_estimate(FrameworkProfile::accelerate_fsdp, c, hw), "SHARD_GRAD_OP"));
}

TEST_CASE("each stack hides its collectives behind compute at the ZeRO stages where it overlaps them", "[frameworks]") {
    TrialConfig c = variant("llama-7b", Method::full, Precision::bf16_mixed, 8, 0);
    c.micro_batch = 4;  // 4 x 4096 tokens of compute outlast every stage's collectives
    c.context = 4096;
    const Hardware hw = *find_device("h100-80gb");
    // Exposed collective seconds under profile f's options: 0 where hidden, our engine's where not.
    const auto exposed = [&](FrameworkProfile f, std::uint32_t zero) {
        TrialConfig z = c;
        z.zero_stage = zero;
        EstimateOptions o;
        apply_profile_options(f, o);
        return step_time(z.model, z, hw, o).comm_s;
    };
    for (std::uint32_t zero : {0u, 1u, 2u, 3u}) {
        INFO("ZeRO-" << zero);
        const double serial = exposed(FrameworkProfile::tune, zero);
        REQUIRE(serial > 0);
        // DeepSpeed's overlap_comm defaults to stage 3 only; HF Trainer runs it at ZeRO 1-3, DDP at ZeRO-0.
        CHECK(exposed(FrameworkProfile::deepspeed, zero) == (zero == 3 ? 0.0 : serial));
        CHECK(exposed(FrameworkProfile::hf_trainer, zero) == (zero == 0 || zero == 3 ? 0.0 : serial));
        CHECK(exposed(FrameworkProfile::torchrun, zero) == exposed(FrameworkProfile::hf_trainer, zero));
        for (FrameworkProfile f :
             {FrameworkProfile::accelerate_fsdp, FrameworkProfile::torchtitan, FrameworkProfile::litgpt})
            CHECK(exposed(f, zero) == 0.0);
    }
}

TEST_CASE("a stack hides its collectives only behind the compute they run beside", "[frameworks]") {
    const Hardware hw = *find_device("h100-80gb");
    const auto timed = [&](FrameworkProfile f, const TrialConfig& z) {
        EstimateOptions o;
        apply_profile_options(f, o);
        return step_time(z.model, z, hw, o);
    };
    // ZeRO-3 on one short sequence: the gathers and reduce-scatters outlast forward and backward.
    TrialConfig c = variant("llama-7b", Method::full, Precision::bf16_mixed, 8, 3);
    c.micro_batch = 1;
    c.context = 64;
    c.grad_accum = 1;
    const StepTime serial = timed(FrameworkProfile::tune, c);
    const StepTime fsdp = timed(FrameworkProfile::accelerate_fsdp, c);
    const double compute = fsdp.compute_s + fsdp.attention_s;
    REQUIRE(serial.comm_s > compute);
    CHECK(fsdp.comm_s == Approx(serial.comm_s - compute));
    CHECK(timed(FrameworkProfile::deepspeed, c).comm_s == Approx(serial.comm_s - compute));
    // DDP at ZeRO-0 all-reduces beside the last micro-batch's backward (2/3 of its compute) only.
    c.zero_stage = 0;
    c.grad_accum = 4;
    c.context = 512;
    const StepTime serial0 = timed(FrameworkProfile::tune, c);
    const StepTime ddp = timed(FrameworkProfile::hf_trainer, c);
    const double last_backward = (ddp.compute_s + ddp.attention_s) / 4 * 2 / 3;
    REQUIRE(serial0.comm_s > last_backward);
    CHECK(ddp.comm_s == Approx(serial0.comm_s - last_backward));
    // Where compute outlasts them, they hide whole.
    c.context = 4096;
    c.grad_accum = 1;
    c.micro_batch = 8;
    CHECK(timed(FrameworkProfile::hf_trainer, c).comm_s == 0.0);
}
