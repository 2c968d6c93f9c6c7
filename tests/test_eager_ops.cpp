// The frameworks' eager element-wise ops in their step time (estimate/frameworks/eager_ops.h).
#include <catch2/catch.hpp>

#include <memory>

#include "core/presets.h"
#include "estimate/estimate.h"
#include "estimate/frameworks/eager_ops.h"
#include "estimate/frameworks/framework_profile.h"
#include "probe/probes.h"

using namespace tune;

namespace {

// torchtitan's Llama-3-8B run on A100s: selective-op, micro-batch 1, context 8192, ZeRO-3 over 64.
TrialConfig titan_8b() {
    TrialConfig c;
    c.model = *find_model("llama3-8b");
    c.precision = Precision::bf16_mixed;
    c.zero_stage = 3;
    c.world_size = 64;
    c.context = 8192;
    c.checkpointing = Checkpointing::selective_op;
    return c;
}

}  // namespace

TEST_CASE("the eager ops' bytes per element, op by op", "[frameworks][eager]") {
    // bf16 RMSNorm: upcast 2 + 4, pow 8, mean 4, times rsqrt 8, cast back 4 + 2, times weight 4.
    CHECK(eager::rmsnorm(2) == 36);
    CHECK(eager::rmsnorm(4) == 28);  // an fp32 input: no casts
    CHECK(eager::residual_add(4, 2) == 10);
    // rotate_half (3 x 2), x cos and rotated x sin (4 each), their sum (6).
    CHECK(eager::rotate_half_rope(2, 2) == 20);
    // fp32 cos promotes: products 6 each, the sum 12, the cast back 6.
    CHECK(eager::rotate_half_rope(2, 4) == 36);
    CHECK(eager::upcast_cross_entropy(2) == 48);
}

TEST_CASE("torchtitan's Llama-3-8B layer moves its ops' bytes, counted by hand", "[frameworks][eager]") {
    const EagerTraffic t = torchtitan_eager(titan_8b());
    // Two norms 2 x 36 x 4096; RoPE 20 x (4096 + 1024); repeat_kv 2 x 2 x (1024 + 4096);
    // the output made contiguous 4 x 4096; SwiGLU 10 x 14336; two residual sums 2 x 6 x 4096.
    CHECK(t.layer_forward == 294912 + 102400 + 20480 + 16384 + 143360 + 49152);
    CHECK(t.outer_forward == 36 * 4096);
    CHECK(t.loss_whole == 48.0 * 128256);
    CHECK(t.per_micro_batch == 0);
}

TEST_CASE("the step streams forward, backward twice the forward, and the recompute through HBM",
          "[frameworks][eager]") {
    TrialConfig c = titan_8b();
    const Hardware hw = *find_device("a100-80gb");
    const EagerTraffic t = torchtitan_eager(c);
    const double tokens = 8192, layers = 32;
    const double per_token = layers * t.layer_forward * 4 + 3 * t.outer_forward + t.loss_whole;
    CHECK(eager_seconds(t, c, hw) == Approx(per_token * tokens / hw.hbm_bytes_per_s));
    c.checkpointing = Checkpointing::none;  // no element-wise recompute
    CHECK(eager_seconds(t, c, hw) == Approx((per_token - layers * t.layer_forward) * tokens / hw.hbm_bytes_per_s));
    c.grad_accum = 3;
    CHECK(eager_seconds(t, c, hw) == Approx(3 * (per_token - layers * t.layer_forward) * tokens / hw.hbm_bytes_per_s));
}

TEST_CASE("a stack's step is our engine's plus its eager ops, and its tokens/s follow", "[frameworks][eager]") {
    const TrialConfig c = titan_8b();
    const Hardware hw = *find_device("a100-80gb");
    const FrameworkEstimate e = framework_estimate(FrameworkProfile::torchtitan, c, hw);
    REQUIRE(e.time_terms.size() == 1);
    const double eager = eager_seconds(torchtitan_eager(c), c, hw);
    CHECK(e.time_terms[0].seconds == Approx(eager));
    CHECK(e.step_s == Approx(e.engine.step_s + eager));
    CHECK(e.tokens_per_s == Approx(e.engine.tokens_per_s * e.engine.step_s / e.step_s));
    CHECK(e.mfu < e.engine.mfu);
    // Our engine's profile is our engine.
    const FrameworkEstimate tune = framework_estimate(FrameworkProfile::tune, c, hw);
    CHECK(tune.time_terms.empty());
    CHECK(tune.step_s == tune.engine.step_s);
    // Element-wise traffic grows with hidden, GEMMs with hidden^2: a 70B step loses a smaller share.
    TrialConfig big = c;
    big.model = *find_model("llama-70b");
    big.checkpointing = Checkpointing::full;
    const FrameworkEstimate b = framework_estimate(FrameworkProfile::torchtitan, big, hw);
    CHECK(b.time_terms[0].seconds / b.engine.step_s < 0.5 * e.time_terms[0].seconds / e.engine.step_s);
}

TEST_CASE("transformers under autocast keeps an fp32 stream and casts each weight per forward, DeepSpeed does not",
          "[frameworks][eager]") {
    TrialConfig c = titan_8b();
    c.model = *find_model("llama-7b");
    c.world_size = 8;
    c.context = 2048;
    c.checkpointing = Checkpointing::full;
    const EagerTraffic hf = transformers_eager(FrameworkProfile::hf_trainer, c);
    const EagerTraffic ds = transformers_eager(FrameworkProfile::deepspeed, c);
    const ModelSpec& m = c.model;
    // 6 bytes a weight (fp32 read, bf16 written), the layers' twice with full recomputation.
    CHECK(hf.per_micro_batch == Approx(6.0 * (2.0 * static_cast<double>(m.layers * m.layer_params()) +
                                              static_cast<double>(m.vocab * m.hidden))));
    CHECK(ds.per_micro_batch == 0);
    // The fp32 stream: norms without casts (28 a byte-pair cheaper each) but fp32 residuals,
    // products with fp32 cos and sin, and each of q, k, v, gate, up casting its input (6 x 5 x hidden).
    const double h = 4096, q = 4096;
    CHECK(hf.layer_forward - ds.layer_forward ==
          Approx(2 * (28 - 36) * h + 5 * 6 * h + (36 - 20) * (q + q) + 2 * (10 - 6) * h));
    // LoRA on every linear under PEFT: the scaled adapter output added to each base output.
    c.method = Method::lora;
    c.precision = Precision::bf16;
    const EagerTraffic lora = transformers_eager(FrameworkProfile::deepspeed, c);
    CHECK(lora.layer_forward - ds.layer_forward == Approx(10 * (5 * 4096 + 2 * 11008.0)));
}

TEST_CASE("with probed rates a stack's eager ops replace our engine's fused ones", "[frameworks][eager]") {
    TrialConfig c;
    c.model = *find_model("tiny");
    c.micro_batch = 2;
    c.context = 64;
    c.precision = Precision::fp32;
    const Hardware cpu = *find_device("cpu");
    ProbedRates rates = probe::plan_probes(c.model, {c});
    for (GemmRate& g : rates.gemm) g.flops_per_s = 1e9;
    for (AttentionRate& a : rates.attention) a.forward_s = a.backward_s = 1e-3;
    for (ElementwiseRate& r : rates.elementwise) r.layer_forward_s = 1e-3, r.layer_backward_s = 2e-3, r.outer_s = 5e-4;
    EstimateOptions o;
    o.probed = std::make_shared<const ProbedRates>(rates);
    const FrameworkEstimate e = framework_estimate(FrameworkProfile::hf_trainer, c, cpu, o);
    REQUIRE(e.time_terms.size() == 2);
    const double fused = static_cast<double>(c.model.layers) * 3e-3 + 5e-4;
    CHECK(e.time_terms[1].seconds == Approx(-fused));
    CHECK(e.step_s == Approx(e.engine.step_s + e.time_terms[0].seconds - fused));
}

TEST_CASE("LitGPT's layer: an RMSNorm weighted in fp32, RoPE promoted by fp32 cos, LoRA's dropout and scaled sum",
          "[frameworks][eager]") {
    TrialConfig c;
    c.model = *find_model("llama-7b");
    c.precision = Precision::bf16;
    c.method = Method::lora;
    c.lora_targets = LoraTargets::attention;
    CHECK(eager::rmsnorm_fp32_weight(2) == 40);
    CHECK(eager::rmsnorm_fp32_weight(4) == 28);
    const EagerTraffic t = litgpt_eager(c, 0.05);
    // Norms 2 x 40; RoPE 36 and torch.cat's copy 4 on q and k; SDPA's output reshaped in place;
    // residuals 2 x 6; LoRA on q, k, v, o: dropout 2 x 2 + 1 on the input, scale and sum 10
    // on the output; all x 4096; SwiGLU 10 x 11008.
    CHECK(t.layer_forward == (80 + 40 * 2 + 12 + 4 * 15) * 4096 + 10 * 11008);
    CHECK(t.per_micro_batch == 0);
    // No dropout (tune's exports): only the scale and the sum on each adapted output.
    CHECK(litgpt_eager(c, 0.0).layer_forward == (80 + 40 * 2 + 12 + 4 * 10) * 4096 + 10 * 11008);
}
