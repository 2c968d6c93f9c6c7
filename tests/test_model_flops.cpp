// Model FLOPs (estimate/model_flops.h): one count for the estimator's MFU and
// the trial's measured MFU, against numbers worked out by hand for Llama-2-7B.
#include <catch2/catch.hpp>

#include "core/presets.h"
#include "estimate/estimate_time.h"
#include "estimate/model_flops.h"
#include "train/trial.h"

using namespace tune;

namespace {

TrialConfig llama7b(Method method) {
    TrialConfig c;
    c.model = *find_model("llama-7b");
    c.method = method;
    c.precision = Precision::bf16_mixed;
    c.attention = Attention::flash;
    c.context = 4096, c.micro_batch = 1, c.grad_accum = 2, c.world_size = 1;
    if (method != Method::full) c.lora_rank = 64, c.lora_targets = LoraTargets::all_linear;
    return c;
}

// By hand: h = 4096, f = 11008, V = 32000, L = 32, s = 4096, r = 64.
// N   = 32 (4 h^2 + 3 h f) + V h            = 6,607,077,376 matmul weights (layers and LM head)
// N_a = 32 * 64 (4 (h + h) + 3 (h + f))     =   159,907,840 adapter weights
// attention, flash: 3 L (2 s h)             = 3,221,225,472
constexpr double kFull = 6 * 6607077376.0 + 3221225472.0;                    // 42,863,689,728
constexpr double kLora = 4 * 6607077376.0 + 6 * 159907840.0 + 3221225472.0;  // 30,608,982,016

}  // namespace

TEST_CASE("model FLOPs: 6N for full training, 4N + 6N_adapter with a frozen base", "[estimate][time][lora]") {
    const TrialConfig full = llama7b(Method::full);
    CHECK(model_flops_per_token(full.model, full) == Approx(kFull).epsilon(1e-12));
    for (Method method : {Method::lora, Method::qlora}) {
        const TrialConfig c = llama7b(method);
        INFO(summary(c));
        // QLoRA's dequantization is not model FLOPs: the same count as LoRA.
        CHECK(model_flops_per_token(c.model, c) == Approx(kLora).epsilon(1e-12));
        // The estimator's MFU and the measured MFU count the same FLOPs.
        const StepTime t = step_time(c.model, c, *find_device("rtx4090"), {});
        CHECK(t.model_flops_per_token == model_flops_per_token(c.model, c));
        CHECK(train::step_flops(c) == Approx(kLora * 4096 * 2).epsilon(1e-12));
    }
    // The attention-only targets: N_a = 32 * 64 * 4 (h + h) = 67,108,864.
    TrialConfig attention = llama7b(Method::lora);
    attention.lora_targets = LoraTargets::attention;
    CHECK(model_flops_per_token(attention.model, attention) ==
          Approx(4 * 6607077376.0 + 6 * 67108864.0 + 3221225472.0).epsilon(1e-12));
}

TEST_CASE("the time model computes what the trainer computes for LoRA: no weight gradients of the base",
          "[estimate][time][lora]") {
    TrialConfig c = llama7b(Method::lora);
    c.checkpointing = Checkpointing::full;
    const Hardware gpu = *find_device("h100-80gb");
    const StepTime t = step_time(c.model, c, gpu, {});
    // Full recompute: each layer's forward but the down projection (base
    // 2 h f and its adapter's B product 2 r h), plus flash's scores again (s h).
    const double h = 4096, f = 11008, r = 64, s = 4096;
    const double layer_forward = 2 * (4 * h * h + 3 * h * f) + 2 * r * (4 * (h + h) + 3 * (h + f)) + 2 * s * h;
    const double recompute = 32 * (layer_forward - 2 * h * f - 2 * r * h + s * h);
    CHECK(t.flops_per_token - t.model_flops_per_token == Approx(recompute).epsilon(1e-12));
}
