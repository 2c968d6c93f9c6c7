// The estimator's whole answer: fits against the limit and margin, step time,
// tokens/s and MFU, and the options the driver calibrates.
#include <catch2/catch.hpp>

#include "core/presets.h"
#include "estimate/estimate.h"

using namespace tune;

namespace {

TrialConfig llama7b() {
    TrialConfig c;
    c.model = *find_model("llama-7b");
    c.optimizer = Optimizer::adamw;
    c.precision = Precision::bf16_mixed;
    c.zero_stage = 3;
    c.world_size = 8;
    c.context = 4096;
    c.checkpointing = Checkpointing::full;
    return c;
}

}  // namespace

TEST_CASE("fits compares the peak with the limit less the margin", "[estimate]") {
    const TrialConfig c = llama7b();
    const Hardware h100 = *find_device("h100-80gb");
    EstimateOptions o;
    const Estimate e = estimate(c, h100, o);
    REQUIRE(e.memory.peak > 0);
    CHECK(e.fits);
    CHECK(usable_bytes(c, h100, o) == static_cast<std::uint64_t>(static_cast<double>(h100.memory_bytes) * 0.95));

    // A limit just at the peak fits with no margin and not with one.
    o.memory_limit = e.memory.peak;
    o.margin = 0.0;
    CHECK(estimate(c, h100, o).fits);
    o.margin = 0.05;
    CHECK_FALSE(estimate(c, h100, o).fits);
    o.memory_limit = e.memory.peak - 1;
    o.margin = 0.0;
    CHECK_FALSE(estimate(c, h100, o).fits);

    // The config's own limit applies when the options set none.
    TrialConfig limited = c;
    limited.memory_limit = 8ull << 30;
    CHECK_FALSE(estimate(limited, h100, {}).fits);
    CHECK(usable_bytes(limited, h100, {}) == static_cast<std::uint64_t>(static_cast<double>(8ull << 30) * 0.95));
}

TEST_CASE("ZeRO stage 0 of llama-7b with AdamW does not fit 80 GB, stage 3 over 8 does", "[estimate]") {
    TrialConfig c = llama7b();
    const Hardware h100 = *find_device("h100-80gb");
    c.zero_stage = 0;
    const Estimate z0 = estimate(c, h100);
    CHECK_FALSE(z0.fits);  // 16 bytes x 6.74B parameters = 108 GB of model states alone
    CHECK(z0.memory[Component::optim] == 8 * c.model.param_count());
    c.zero_stage = 3;
    CHECK(estimate(c, h100).fits);
}

TEST_CASE("step time: compute from FLOPs and efficiency, tokens/s and MFU follow", "[estimate][time]") {
    TrialConfig c = llama7b();
    c.attention = Attention::eager;  // PaLM's formula counts the full (s, s) square
    c.world_size = 1;
    c.zero_stage = 0;
    c.checkpointing = Checkpointing::none;
    const Hardware h100 = *find_device("h100-80gb");
    EstimateOptions o;
    const StepTime t = step_time(c.model, c, h100, o);
    // 6N (matmul weights) + 12 L h s per token (PaLM's formula).
    const double n = 32.0 * (2 * 4096.0 * 4096 + 2 * 4096.0 * 4096 + 3 * 4096.0 * 11008) + 32000.0 * 4096;
    CHECK(t.model_flops_per_token == Approx(6 * n + 12 * 32 * 4096.0 * 4096));
    CHECK(t.flops_per_token == t.model_flops_per_token);
    CHECK(t.comm_s == 0);  // one rank
    // The H100 preset's published training efficiency, 46.44% (llm-foundry's MPT-7B), in place of the nominal 50%.
    CHECK(h100.training_efficiency == 0.4644);
    CHECK(t.compute_s == Approx(t.flops_per_token * 4096 / (989e12 * 0.4644)));
    // Attention's (H, S, S) traffic: 32 layers x 32 heads x s per token, 16 + 7*2 bytes each (bf16-mixed).
    const double hbm = h100.hbm_bytes_per_s;
    CHECK(t.attention_s == Approx(32.0 * 32 * 4096 * (16 + 7 * weight_bytes(c.precision)) * 4096 / hbm));
    CHECK(t.step_s == Approx(t.compute_s + t.optimizer_s + t.attention_s));
    CHECK(t.tokens_per_s == Approx(4096 / t.step_s));
    CHECK(t.mfu == Approx(t.model_flops_per_token * t.tokens_per_s / 989e12));
    CHECK(t.mfu < 0.5);  // the efficiency bounds it, the optimizer step lowers it further

    // Twice the efficiency halves the compute time (the driver calibrates it).
    o.compute_efficiency = 1.0;
    CHECK(step_time(c.model, c, h100, o).compute_s == Approx(t.compute_s / 2));
    // A device without a published efficiency takes the nominal one; fp32 runs off the tensor cores and too.
    Hardware unmeasured = h100;
    unmeasured.training_efficiency = 0;
    CHECK(step_time(c.model, c, unmeasured, {}).compute_s == Approx(t.flops_per_token * 4096 / (989e12 * 0.5)));
    TrialConfig fp32 = c;
    fp32.precision = Precision::fp32;
    CHECK(step_time(c.model, fp32, h100, {}).compute_s == Approx(step_time(c.model, fp32, unmeasured, {}).compute_s));

    // Full checkpointing recomputes the forward of every layer: more FLOPs, same MFU numerator.
    c.checkpointing = Checkpointing::full;
    const StepTime full = step_time(c.model, c, h100, {});
    CHECK(full.flops_per_token > t.flops_per_token);
    CHECK(full.model_flops_per_token == t.model_flops_per_token);
    CHECK(full.mfu < t.mfu);

    // Selective checkpointing recomputes the attention forward: scores and P v, 4 s h FLOPs per token and layer.
    c.checkpointing = Checkpointing::selective;
    const StepTime selective = step_time(c.model, c, h100, {});
    CHECK(selective.flops_per_token - t.flops_per_token == Approx(32 * 4.0 * 4096 * 4096));
    CHECK(selective.attention_s > t.attention_s);

    // Selective-op recomputes the k, o and up projections (2 h kv + 2 q h + 2 h f per token and
    // layer), never attention: no more (s, s) traffic than none.
    c.checkpointing = Checkpointing::selective_op;
    const StepTime op = step_time(c.model, c, h100, {});
    CHECK(op.flops_per_token - t.flops_per_token == Approx(32 * (2 * 4096.0 * 4096 * 2 + 2 * 4096.0 * 11008)));
    CHECK(op.attention_s == Approx(t.attention_s));
    CHECK(op.model_flops_per_token == t.model_flops_per_token);
}

TEST_CASE("communication grows with the ZeRO stage and vanishes on one rank", "[estimate][time]") {
    TrialConfig c = llama7b();
    const Hardware h100 = *find_device("h100-80gb");
    double previous = 0;
    for (std::uint32_t stage : {0u, 2u, 3u}) {
        c.zero_stage = stage;
        const StepTime t = step_time(c.model, c, h100, {});
        CHECK(t.comm_bytes > 0);
        CHECK(t.comm_bytes >= previous);
        previous = t.comm_bytes;
    }
    // Stage 0: one ring all-reduce of the bf16 gradients, 2 (N-1)/N of them.
    c.zero_stage = 0;
    CHECK(step_time(c.model, c, h100, {}).comm_bytes == Approx(2 * 7.0 / 8 * 2 * c.model.param_count()));
    c.world_size = 1;
    CHECK(step_time(c.model, c, h100, {}).comm_bytes == 0);
}

TEST_CASE("estimate() takes the sweep's ModelSpec over the config's copy", "[estimate]") {
    TrialConfig c = llama7b();
    const Hardware h100 = *find_device("h100-80gb");
    const Estimate own = estimate(c, h100);
    const ModelSpec model = c.model;
    c.model = ModelSpec{};  // a grid can hold configs without their own model copy
    CHECK(estimate(model, c, h100) == own);
}

TEST_CASE("flash attention: masked tiles skipped, scores recomputed in backward, no (s, s) traffic",
          "[estimate][time][flash]") {
    TrialConfig c = llama7b();
    c.world_size = 1, c.zero_stage = 0, c.checkpointing = Checkpointing::none;
    const Hardware h100 = *find_device("h100-80gb");
    c.attention = Attention::eager;
    const StepTime eager = step_time(c.model, c, h100, {});
    c.attention = Attention::flash;
    const StepTime flash = step_time(c.model, c, h100, {});
    const double lhs = 32.0 * 4096 * 4096;  // layers x h x s
    // Half of eager's 12 L h s model FLOPs (causal tiles), plus q k^T once more in backward (GPU).
    CHECK(eager.model_flops_per_token - flash.model_flops_per_token == Approx(6 * lhs));
    CHECK(flash.flops_per_token - flash.model_flops_per_token == Approx(1 * lhs));
    CHECK(flash.attention_s == 0);
    CHECK(flash.step_s < eager.step_s);
    // The CPU's two backward passes recompute the scores twice and dP once more.
    const StepTime cpu = step_time(c.model, c, *find_device("cpu"), {});
    CHECK(cpu.flops_per_token - cpu.model_flops_per_token == Approx(3 * lhs));
    // Selective checkpointing with flash keeps what none keeps and recomputes nothing more.
    c.checkpointing = Checkpointing::selective;
    CHECK(step_time(c.model, c, h100, {}).flops_per_token == flash.flops_per_token);
}

TEST_CASE(
    "the issue's stories: llama3-8b on 4 x A100-40GB at 8k fits a mixed AdamW config with flash, "
    "llama-7b without checkpointing at 4k no longer needs ~144 GiB",
    "[estimate][memory][flash]") {
    // Llama-3-8B, 4 x A100-40GB, context 8192, bf16-mixed AdamW: with eager
    // attention nothing fits; with flash some ZeRO-3 configuration does.
    TrialConfig c;
    c.model = *find_model("llama3-8b");
    c.optimizer = Optimizer::adamw;
    c.precision = Precision::bf16_mixed;
    c.world_size = 4;
    c.context = 8192;
    const Hardware a100 = *find_device("a100-40gb");
    auto any_fits = [&](Attention attention) {
        for (std::uint32_t stage : {1u, 2u, 3u})
            for (Checkpointing ck : kCheckpointings) {
                TrialConfig t = c;
                t.zero_stage = stage, t.checkpointing = ck, t.attention = attention;
                if (estimate(t, a100).fits) return true;
            }
        return false;
    };
    CHECK_FALSE(any_fits(Attention::eager));
    CHECK(any_fits(Attention::flash));

    // Llama-7B, no checkpointing, context 4096, one sequence on an H100: eager
    // keeps 1 GiB of bf16 probabilities per layer (32 GiB) and a 3.2 GB
    // workspace; flash keeps 0.5 MiB of lse per layer, and its workspace is cuDNN's: the fp32 dQ
    // accumulator (4 x 32 heads x 4096 x 128) and the plan's bound (1 MiB + 8 bytes a query row).
    TrialConfig l;
    l.model = *find_model("llama-7b");
    l.optimizer = Optimizer::adamw;
    l.precision = Precision::bf16_mixed;
    l.context = 4096;
    const Hardware h100 = *find_device("h100-80gb");
    l.attention = Attention::eager;
    const Estimate eager = estimate(l, h100);
    l.attention = Attention::flash;
    const Estimate flash = estimate(l, h100);
    CHECK(eager.memory.peak - flash.memory.peak > 32ull * (1ull << 30));
    CHECK(flash.memory[Component::workspace] == 4ull * 32 * 4096 * 128 + (1ull << 20) + 8ull * 32 * 4096);
}
