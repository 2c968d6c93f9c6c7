// Probes and the time model: the shapes a sweep asks for, records that
// round-trip through their keys and the store's cache, the time model
// taking probed rates instead of nominal peaks, and the real-memory fields
// through the store.
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>

#include <algorithm>
#include <functional>
#include <utility>

#include <fmt/format.h>

#include "core/presets.h"
#include "estimate/estimate.h"
#include "estimate/model_flops.h"
#include "kernels/cpu/cpu_backend.h"
#include "probe/probe_timing.h"
#include "probe/probes.h"
#include "probe/sweep_probes.h"
#include "store/store.h"
#include "sweep/spec.h"
#include "tests/support/tiny_cpu_sweep.h"
#include "tests/test_store_support.h"

using namespace tune;

namespace {

TrialConfig tiny_config(std::uint32_t micro_batch, std::uint32_t context, Precision p) {
    TrialConfig c;
    c.model = *find_model("tiny");
    c.micro_batch = micro_batch;
    c.context = context;
    c.precision = p;
    return c;
}

// A plan measured briefly on a one-thread CPU backend, and the rates read back from its records.
struct Measured {
    ProbedRates rates, back;
};
Measured measure_and_read_back(const ProbedRates& plan) {
    kernels::CpuBackend backend({1, 0});
    probe::ProbeSettings settings;
    settings.min_seconds = 0.001;
    std::vector<probe::ProbeRecord> records;
    Measured out;
    out.rates = probe::run_probes(backend, plan, settings, &records);
    out.back = probe::rates_of(records);
    CHECK(backend.live_bytes() == 0);
    return out;
}

}  // namespace

TEST_CASE("the GEMM primer runs on scratch of its own, freed with it", "[probe]") {
    kernels::CpuBackend backend({1, 0});
    {
        const std::function<void()> primer = probe::gemm_primer(backend);
        CHECK(backend.live_bytes() >= 3 * 128 * 128 * sizeof(float));
        primer();
        primer();
    }
    CHECK(backend.live_bytes() == 0);
}

TEST_CASE("the cache displacer writes a core's private cache on scratch of its own, freed with it", "[probe]") {
    kernels::CpuBackend backend({1, 0});
    const std::uint64_t cache = backend.private_cache_bytes();
    {
        const std::function<void()> displace = probe::cache_displacer(backend);
        CHECK(backend.live_bytes() == cache);  // 0 where sysfs describes no level-2 cache
        displace();
        displace();
    }
    CHECK(backend.live_bytes() == 0);
}

TEST_CASE("a sweep's probes: each GEMM shape per tokens and dtype, attention per shape", "[probe]") {
    const ModelSpec m = *find_model("tiny");
    const std::vector<TrialConfig> configs{tiny_config(2, 64, Precision::fp32), tiny_config(1, 128, Precision::fp32),
                                           tiny_config(2, 64, Precision::bf16_mixed)};
    const ProbedRates plan = probe::plan_probes(m, configs);
    // Rows 128 (fp32, from 2x64 and 1x128 alike) and 128 (16-bit). In 16 bits the CPU
    // backend's GEMMs widen, so its projections run apart: 17 distinct calls (forward q,
    // k/v, o, gate/up, down; dX q/o, k/v, gate, up, down; dW of q/o, k/v, gate/up, down;
    // the LM head's three). fp32 fuses q, k, v and gate, up (core/projection_fusion.h):
    // 15 (forward qkv, o, gate|up, down; dX qkv, o, gate|up, down; the same four dW, the head's three).
    CHECK(plan.gemm.size() == 32);
    CHECK(plan.attention.size() == 3);
    CHECK(plan.elementwise.size() == 2);   // per tokens per micro-batch and dtype
    REQUIRE(plan.optimizers.size() == 2);  // adamw in fp32 and in bf16-mixed
    CHECK(plan.optimizers[0].precision == Precision::fp32);
    CHECK(plan.optimizers[1].precision == Precision::bf16_mixed);
    // The down projection (n = h, k = f): dX (T, f) from dY (T, h) and W (h, f); dW (h, f) over T.
    const auto has = [&](std::int64_t mm, std::int64_t n, std::int64_t k, GemmPass pass) {
        return std::any_of(plan.gemm.begin(), plan.gemm.end(), [&](const GemmRate& g) {
            return g.m == mm && g.n == n && g.k == k && g.pass == pass && g.dtype == ProbeDtype::f32;
        });
    };
    const auto h = static_cast<std::int64_t>(m.hidden), f = static_cast<std::int64_t>(m.ffn);
    CHECK(has(128, h, f, GemmPass::forward));
    CHECK(has(128, f, h, GemmPass::input_grad));
    CHECK(has(h, f, 128, GemmPass::weight_grad));
}

TEST_CASE("the GEMM probes call C as the trainer does: accumulated, or fp32 logits", "[probe]") {
    const ModelSpec m = *find_model("tiny");
    const ProbedRates plan =
        probe::plan_probes(m, {tiny_config(2, 64, Precision::fp32), tiny_config(2, 64, Precision::bf16_mixed)});
    const auto h = static_cast<std::int64_t>(m.hidden), kv = static_cast<std::int64_t>(m.kv_dim());
    const auto f = static_cast<std::int64_t>(m.ffn), v = static_cast<std::int64_t>(m.vocab);
    const auto has = [&](std::int64_t mm, std::int64_t n, std::int64_t k, GemmPass pass, GemmOutput out,
                         ProbeDtype dtype = ProbeDtype::f32) {
        return std::any_of(plan.gemm.begin(), plan.gemm.end(), [&](const GemmRate& g) {
            return g.m == mm && g.n == n && g.k == k && g.pass == pass && g.output == out && g.dtype == dtype;
        });
    };
    const GemmOutput added{.accumulate = true}, logits{.fp32 = true};
    const auto bf16 = ProbeDtype::bf16;  // the CPU backend runs 16-bit projections apart (they widen)
    // q (beta 0) and o (into the residual) share a shape but not a call; so do gate and up's dX.
    CHECK(has(128, h, h, GemmPass::forward, {}, bf16));
    CHECK(has(128, h, h, GemmPass::forward, added, bf16));
    CHECK(has(128, h, f, GemmPass::forward, added, bf16));      // down, into the residual
    CHECK(has(128, h, kv, GemmPass::input_grad, added, bf16));  // k and v sum into q's dX
    CHECK(has(128, h, f, GemmPass::input_grad, {}, bf16));      // gate's
    CHECK(has(128, h, f, GemmPass::input_grad, added, bf16));   // up's, into gate's
    CHECK_FALSE(has(128, h, kv, GemmPass::input_grad, {}, bf16));
    // fp32 fuses them: one product [q k v] and one [g u] each way, nothing summed into a dX.
    CHECK(has(128, h + 2 * kv, h, GemmPass::forward, {}));
    CHECK(has(128, h, h + 2 * kv, GemmPass::input_grad, {}));
    CHECK(has(128, 2 * f, h, GemmPass::forward, {}));
    CHECK(has(128, h, 2 * f, GemmPass::input_grad, {}));
    CHECK(has(kv, h, 128, GemmPass::weight_grad, {}));  // each weight gradient its own
    CHECK_FALSE(has(128, h, kv, GemmPass::input_grad, added));
    CHECK_FALSE(has(128, h, h, GemmPass::forward, {}));
    CHECK(has(128, h, h, GemmPass::forward, added));  // o, into the residual
    // A device backend fuses its 16-bit projections too.
    const ProbedRates device =
        probe::plan_probes(m, {tiny_config(2, 64, Precision::bf16_mixed)}, kDeviceOptimizerProbeElements, false);
    CHECK(std::any_of(device.gemm.begin(), device.gemm.end(), [&](const GemmRate& g) {
        return g.m == 128 && g.n == h + 2 * kv && g.k == h && g.pass == GemmPass::forward;
    }));
    // The LM head's logits are fp32 under 16-bit operands; in fp32 the flag would not change the call.
    CHECK(has(128, v, h, GemmPass::forward, logits, ProbeDtype::bf16));
    CHECK_FALSE(has(128, v, h, GemmPass::forward, {}, ProbeDtype::bf16));
    CHECK(has(128, v, h, GemmPass::forward, {}));
    // Each output's key carries it, and reads back; its name says it in words.
    kernels::CpuBackend backend({1, 0});
    probe::ProbeSettings settings;
    settings.min_seconds = 0.001;
    const ProbedRates rates = probe::run_probes(backend, plan, settings);
    const ProbedRates back = probe::rates_of(probe::records_of(rates));
    REQUIRE(back.gemm.size() == rates.gemm.size());
    for (std::size_t i = 0; i < rates.gemm.size(); ++i) {
        CHECK(rates.gemm[i].flops_per_s > 0);
        CHECK(back.gemm[i].output == rates.gemm[i].output);
        CHECK(back.gemm[i].pass == rates.gemm[i].pass);
    }
    ProbedRates two;
    two.gemm = {{128, 64, 32, ProbeDtype::bf16, 1e9, GemmPass::input_grad, added},
                {128, 256, 64, ProbeDtype::bf16, 1e9, GemmPass::forward, logits}};
    const std::vector<probe::ProbeRecord> named = probe::records_of(two);
    CHECK(named[0].name == "gemm bf16 m=128 n=64 k=32 dx acc");
    CHECK(named[1].name == "gemm bf16 m=128 n=256 k=64 f32out");
}

TEST_CASE("a GEMM's rate is its output's, else its pass's (a cache from before outputs)", "[probe][estimate]") {
    ProbedRates p;
    p.gemm = {{128, 64, 64, ProbeDtype::bf16, 2e9, GemmPass::forward, {}},
              {128, 64, 64, ProbeDtype::bf16, 1e9, GemmPass::forward, {.accumulate = true}},
              {128, 64, 32, ProbeDtype::bf16, 3e9, GemmPass::input_grad, {}}};
    CHECK(p.gemm_flops_per_s(128, 64, 64, ProbeDtype::bf16) == 2e9);
    CHECK(p.gemm_flops_per_s(128, 64, 64, ProbeDtype::bf16, GemmPass::forward, {.accumulate = true}) == 1e9);
    // No accumulating dX probed: the pass's rate at its shape.
    CHECK(p.gemm_flops_per_s(128, 64, 32, ProbeDtype::bf16, GemmPass::input_grad, {.accumulate = true}) == 3e9);

    // The time model prices o's and down's forward, and k's, v's and up's dX, at the accumulating rate.
    const Hardware cpu = *find_device("cpu");
    const TrialConfig c = tiny_config(2, 64, Precision::bf16_mixed);
    ProbedRates rates = probe::plan_probes(c.model, {c});
    const auto compute = [&](double accumulating_flops) {
        for (GemmRate& g : rates.gemm)
            g.flops_per_s = g.output.accumulate && g.pass != GemmPass::weight_grad ? accumulating_flops : 1e9;
        for (AttentionRate& a : rates.attention) a.forward_s = a.backward_s = 1e-3;
        EstimateOptions o;
        o.probed = std::make_shared<const ProbedRates>(rates);
        return step_time(c.model, c, cpu, o).compute_s;
    };
    const double t = 128, h = static_cast<double>(c.model.hidden), kv = static_cast<double>(c.model.kv_dim());
    const double f = static_cast<double>(c.model.ffn), layers = static_cast<double>(c.model.layers);
    // Per layer: o (t h h) and down (t h f) forward, k and v (t h kv) and up (t h f) dX.
    const double accumulating = layers * 2 * t * (h * h + h * f + 2 * h * kv + h * f);
    CHECK(compute(5e8) - compute(1e9) == Approx(accumulating / 1e9));
}

TEST_CASE("probes measure on a backend and their records round-trip by key", "[probe]") {
    const ModelSpec m = *find_model("tiny");
    const ProbedRates plan = probe::plan_probes(m, {tiny_config(2, 64, Precision::fp32)});
    kernels::CpuBackend backend({1, 0});
    probe::ProbeSettings settings;
    settings.min_seconds = 0.001;
    std::vector<probe::ProbeRecord> records;
    const ProbedRates rates = probe::run_probes(backend, plan, settings, &records);
    for (const GemmRate& g : rates.gemm) CHECK(g.flops_per_s > 0);
    for (const AttentionRate& a : rates.attention) CHECK((a.forward_s > 0 && a.backward_s > 0));
    REQUIRE(rates.optimizers.size() == 1);
    CHECK(rates.optimizers[0].seconds > 0);
    // ... plus the optimizer update and the speed reference.
    REQUIRE(records.size() == plan.gemm.size() + 2 * plan.attention.size() + 3 * plan.elementwise.size() + 2);
    for (const auto& r : records) CHECK(r.seconds > 0);
    const ProbedRates back = probe::rates_of(records);
    REQUIRE(back.gemm.size() == rates.gemm.size());
    CHECK(back.gemm[0].flops_per_s == rates.gemm[0].flops_per_s);
    CHECK(back.gemm[0].m == rates.gemm[0].m);
    REQUIRE(back.attention.size() == 1);
    CHECK(back.attention[0].backward_s == rates.attention[0].backward_s);
    REQUIRE(back.optimizers.size() == 1);
    CHECK(back.optimizers[0].seconds == rates.optimizers[0].seconds);
    CHECK(back.optimizers[0].tensors == rates.optimizers[0].tensors);
    for (std::size_t i = 0; i < rates.gemm.size(); ++i) CHECK(back.gemm[i].pass == rates.gemm[i].pass);
    REQUIRE(back.elementwise.size() == 1);
    CHECK(rates.elementwise[0].layer_forward_s > 0);
    CHECK(back.elementwise[0].layer_forward_s == rates.elementwise[0].layer_forward_s);
    CHECK(back.elementwise[0].layer_backward_s == rates.elementwise[0].layer_backward_s);
    CHECK(back.elementwise[0].outer_s == rates.elementwise[0].outer_s);
    CHECK(back.elementwise[0].ffn == static_cast<std::int64_t>(m.ffn));
    CHECK_FALSE(rates.device_baseline_bytes.has_value());  // the CPU's trials measure their own
    CHECK(backend.live_bytes() == 0);
}

TEST_CASE("a GPU's device baseline is a probe record, and the overhead a sweep's estimates start from",
          "[probe][estimate]") {
    ProbedRates measured;
    measured.device_baseline_bytes = 557ull << 20;
    const ProbedRates back = probe::rates_of(probe::records_of(measured));
    REQUIRE(back.device_baseline_bytes.has_value());
    CHECK(*back.device_baseline_bytes == 557ull << 20);

    const Hardware h100 = *find_device("h100-80gb");
    const TrialConfig c = tiny_config(2, 64, Precision::bf16_mixed);
    EstimateOptions o;
    CHECK(estimate(c, h100, o).memory[Component::overhead] == h100.runtime_overhead_bytes);  // the preset's
    o.probed = std::make_shared<const ProbedRates>(back);
    CHECK(estimate(c, h100, o).memory[Component::overhead] == 557ull << 20);
    o.overhead_bytes = 600ull << 20;  // a trial measured it: that wins
    CHECK(estimate(c, h100, o).memory[Component::overhead] == 600ull << 20);
}

TEST_CASE("the time model takes probed rates per op instead of nominal peaks", "[probe][estimate]") {
    const Hardware cpu = *find_device("cpu");
    const TrialConfig c = tiny_config(2, 64, Precision::fp32);
    ProbedRates rates = probe::plan_probes(c.model, {c});
    const auto with = [&](double gemm_flops) {
        for (GemmRate& g : rates.gemm) g.flops_per_s = gemm_flops;
        for (AttentionRate& a : rates.attention) a.forward_s = a.backward_s = 1e-3;
        for (OptimizerRate& r : rates.optimizers) r.seconds = 1e-3;
        EstimateOptions o;
        o.probed = std::make_shared<const ProbedRates>(rates);
        return step_time(c.model, c, cpu, o);
    };
    const StepTime nominal = step_time(c.model, c, cpu, EstimateOptions{});
    const StepTime fast = with(2e9), slow = with(1e9);
    CHECK(fast.step_s != Approx(nominal.step_s));
    // Half the GEMM rate, twice the compute time; attention is its probed 2 ms per layer.
    CHECK(slow.compute_s == Approx(2 * fast.compute_s));
    CHECK(fast.attention_s == Approx(2e-3 * static_cast<double>(c.model.layers)));
    CHECK(fast.optimizer_s != Approx(nominal.optimizer_s));
}

TEST_CASE("probed passes: dX and dW at their own rates, element-wise ops per layer, LOMO's two passes",
          "[probe][estimate]") {
    const Hardware cpu = *find_device("cpu");
    TrialConfig c = tiny_config(2, 64, Precision::fp32);
    ProbedRates rates = probe::plan_probes(c.model, {c});
    const auto step = [&](double dw_flops, const TrialConfig& config) {
        for (GemmRate& g : rates.gemm) g.flops_per_s = g.pass == GemmPass::weight_grad ? dw_flops : 1e9;
        for (AttentionRate& a : rates.attention) a.forward_s = a.backward_s = 1e-3;
        for (ElementwiseRate& e : rates.elementwise)
            e.layer_forward_s = 1e-3, e.layer_backward_s = 2e-3, e.outer_s = 5e-4;
        EstimateOptions o;
        o.probed = std::make_shared<const ProbedRates>(rates);
        return step_time(config.model, config, cpu, o);
    };
    // The weight gradients are a third of the base GEMMs' FLOPs: at half the rate they add that third again.
    const double equal = step(1e9, c).compute_s, slow_dw = step(5e8, c).compute_s;
    CHECK(slow_dw > equal);
    CHECK(slow_dw < 1.5 * equal);
    const double layers = static_cast<double>(c.model.layers);
    c.grad_accum = 2;
    CHECK(step(1e9, c).elementwise_s == Approx(2 * (layers * 3e-3 + 5e-4)));
    c.checkpointing = Checkpointing::full;  // each layer's forward again
    CHECK(step(1e9, c).elementwise_s == Approx(2 * (layers * 4e-3 + 5e-4)));
    // LOMO (clipping): two whole passes over the micro-batch.
    TrialConfig lomo = tiny_config(2, 64, Precision::fp32);
    lomo.optimizer = Optimizer::lomo;
    TrialConfig adamw = lomo;
    adamw.optimizer = Optimizer::adamw;
    CHECK(step(1e9, lomo).compute_s == Approx(2 * step(1e9, adamw).compute_s));
    CHECK(step(1e9, lomo).attention_s == Approx(2 * step(1e9, adamw).attention_s));
}

TEST_CASE("LoRA's adapter GEMMs are probed at their rank-r shapes and priced at them", "[probe][estimate][lora]") {
    const ModelSpec m = *find_model("tiny");
    TrialConfig lora = tiny_config(2, 64, Precision::fp32);
    lora.method = Method::lora;
    lora.lora_rank = 8;
    const std::int64_t t = 128, h = static_cast<std::int64_t>(m.hidden), r = 8;
    ProbedRates plan = probe::plan_probes(m, {lora});
    const auto planned = [&](std::int64_t rows, std::int64_t n, std::int64_t k, GemmPass pass, GemmOutput output) {
        return std::any_of(plan.gemm.begin(), plan.gemm.end(), [&](const GemmRate& g) {
            return g.m == rows && g.n == n && g.k == k && g.pass == pass && g.output == output;
        });
    };
    // q's adapter as train/lora.cpp calls it: x A^T, y += s xa B^T, dY B, dX += s tmp A, dA, dB.
    CHECK(planned(t, r, h, GemmPass::forward, {}));
    CHECK(planned(t, h, r, GemmPass::forward, {.accumulate = true}));
    CHECK(planned(t, r, h, GemmPass::input_grad, {}));
    CHECK(planned(t, h, r, GemmPass::input_grad, {.accumulate = true}));
    CHECK(planned(r, h, t, GemmPass::weight_grad, {}));
    CHECK(planned(h, r, t, GemmPass::weight_grad, {}));
    // The base is frozen: no weight gradient of its own.
    CHECK_FALSE(planned(h, h, t, GemmPass::weight_grad, {}));
    CHECK(planned(t, h, h, GemmPass::forward, {}));

    // Rank-r GEMMs at a fifth of the base rate (on this host they ran at 20-90 GFLOP/s
    // beside the base's 200): the step prices each at its own.
    const Hardware cpu = *find_device("cpu");
    const auto compute = [&](double adapter_flops) {
        for (GemmRate& g : plan.gemm) g.flops_per_s = g.m == r || g.n == r || g.k == r ? adapter_flops : 1e9;
        for (AttentionRate& a : plan.attention) a.forward_s = a.backward_s = 1e-3;
        EstimateOptions o;
        o.probed = std::make_shared<const ProbedRates>(plan);
        return step_time(m, lora, cpu, o).compute_s;
    };
    double adapter_flops = 0;
    for (const Linear& l : layer_linears(m, lora))
        adapter_flops += 3 * 2 * l.rank * (l.in + l.out) * static_cast<double>(t);  // forward, and twice in backward
    adapter_flops *= static_cast<double>(m.layers);
    CHECK(compute(2e8) - compute(1e9) == Approx(adapter_flops / 2e8 - adapter_flops / 1e9));
}

TEST_CASE("ZeRO-2/3 gradient buckets: zeroed and added into the shard, probed per size and priced per bucket",
          "[probe][estimate][zero]") {
    const ModelSpec m = *find_model("tiny");
    TrialConfig z2 = tiny_config(2, 64, Precision::bf16_mixed);
    z2.world_size = 2;
    z2.zero_stage = 2;
    TrialConfig z1 = z2;
    z1.zero_stage = 1;
    // Stage 1 reduce-scatters the gradient buffers themselves: no bucket.
    CHECK(probe::plan_probes(m, {z1}).buckets.empty());
    const ProbedRates plan = probe::plan_probes(m, {z1, z2});
    REQUIRE(plan.buckets.size() == 2);  // a layer's and the outer buffer's
    for (const BucketRate& b : plan.buckets) CHECK((b.ranks == 2 && b.dtype == ProbeDtype::bf16));

    const auto [rates, back] = measure_and_read_back(plan);
    for (const BucketRate& b : rates.buckets) CHECK(b.seconds > 0);
    REQUIRE(back.buckets.size() == 2);
    CHECK(back.buckets[1].bytes == rates.buckets[1].bytes);
    CHECK(back.buckets[1].seconds == rates.buckets[1].seconds);

    // Each bucket a step fills, at its probed time: per micro-batch the layers' and the
    // outer buffer's twice (the head's backward and the embedding's).
    ProbedRates priced = back;
    for (BucketRate& b : priced.buckets) b.seconds = 1e-3;
    const auto elementwise = [&](const TrialConfig& c, const ProbedRates& r) {
        EstimateOptions o;
        o.probed = std::make_shared<const ProbedRates>(r);
        return step_time(m, c, *find_device("cpu"), o).elementwise_s;
    };
    ProbedRates without = priced;
    without.buckets.clear();
    const double layers = static_cast<double>(m.layers);
    CHECK(elementwise(z2, priced) - elementwise(z2, without) == Approx((layers + 2) * 1e-3));
    z2.grad_accum = 3;
    CHECK(elementwise(z2, priced) - elementwise(z2, without) == Approx(3 * (layers + 2) * 1e-3));
    CHECK(elementwise(z1, priced) == Approx(elementwise(z1, without)));
}

namespace {

// The tiny model on 2 ranks in bf16-mixed, offloaded at `stage`, and the same kept on the device.
std::pair<TrialConfig, TrialConfig> offloaded_and_kept(std::uint32_t stage, Offload o) {
    TrialConfig off = tiny_config(2, 64, Precision::bf16_mixed);
    off.world_size = 2, off.zero_stage = stage, off.offload = o;
    TrialConfig kept = off;
    kept.offload = Offload::none;
    return {off, kept};
}

}  // namespace

TEST_CASE("offload's buckets add into a shard in host memory: probed apart, keyed where = host, priced on a GPU",
          "[probe][estimate][offload]") {
    const ModelSpec m = *find_model("tiny");
    const auto [off, on_device] = offloaded_and_kept(2, Offload::optimizer);
    const ProbedRates plan = probe::plan_probes(m, {off, on_device});
    REQUIRE(plan.buckets.size() == 4);  // a layer's and the outer buffer's, each with its shard on either side
    CHECK(std::count_if(plan.buckets.begin(), plan.buckets.end(), [](const BucketRate& b) { return b.host; }) == 2);

    const auto [rates, back] = measure_and_read_back(plan);
    REQUIRE(back.buckets.size() == 4);
    for (std::size_t i = 0; i < back.buckets.size(); ++i) {
        CHECK(rates.buckets[i].seconds > 0);  // the host's shard from Backend::allocate_host
        CHECK(back.buckets[i].host == rates.buckets[i].host);
    }
    int keyed_host = 0;
    for (const probe::ProbeRecord& r : probe::records_of(rates))
        if (const auto key = nlohmann::json::parse(r.key); key["probe"] == "bucket" && key.contains("where")) {
            CHECK(key["where"] == "host");
            CHECK_THAT(r.name, Catch::EndsWith("shard on the host"));
            ++keyed_host;
        }
    CHECK(keyed_host == 2);

    // Each configuration is priced with the buckets where its shard is.
    ProbedRates priced = back;
    for (BucketRate& b : priced.buckets) b.seconds = b.host ? 5e-3 : 1e-3;
    EstimateOptions o;
    o.probed = std::make_shared<const ProbedRates>(priced);
    ProbedRates without = priced;
    without.buckets.clear();
    EstimateOptions none;
    none.probed = std::make_shared<const ProbedRates>(without);
    const double layers = static_cast<double>(m.layers);
    const Hardware cpu = *find_device("cpu");
    CHECK(step_time(m, off, cpu, o).elementwise_s - step_time(m, off, cpu, none).elementwise_s ==
          Approx((layers + 2) * 5e-3));
    CHECK(step_time(m, on_device, cpu, o).elementwise_s - step_time(m, on_device, cpu, none).elementwise_s ==
          Approx((layers + 2) * 1e-3));
    // On a GPU the probed transfer replaces the link's nominal rate in the offload term (over
    // a link so slow that backward hides none of the gradients' trip there).
    Hardware gpu = *find_device("h100-80gb");
    gpu.host_link_bytes_per_s = 1e6;
    const StepTime probed = step_time(m, off, gpu, o), nominal = step_time(m, off, gpu, none);
    // The slices cross on the side stream behind the next buffer's backward: what outlasts it shows,
    // and at least the last slice (the embedding's), which nothing follows (on the CPU: all of it, above).
    const double backward = probed.compute_s * 2.0 / 3.0;
    REQUIRE(backward > 0);
    CHECK(probed.bucket_s == Approx(std::max((layers + 2) * 5e-3 - backward, 5e-3)));
    CHECK(probed.bucket_s < (layers + 2) * 5e-3);
    CHECK(nominal.bucket_s == 0);
    CHECK(probed.offload_s < nominal.offload_s);
}

TEST_CASE("offload's host link is probed at a layer's shard and prices its copies over the preset's rate",
          "[probe][estimate][offload]") {
    const ModelSpec m = *find_model("tiny");
    const auto [off, kept] = offloaded_and_kept(3, Offload::optimizer_params);
    CHECK(probe::plan_probes(m, {kept}).host_links.empty());
    const ProbedRates plan = probe::plan_probes(m, {off, kept});
    REQUIRE(plan.host_links.size() == 1);
    CHECK(plan.host_links[0].bytes == static_cast<std::uint64_t>(offload_shard_bytes(m, off)));

    const auto [rates, back] = measure_and_read_back(plan);
    REQUIRE(back.host_links.size() == 1);
    CHECK(rates.host_links[0].bytes_per_s > 0);
    CHECK(back.host_links[0].bytes == rates.host_links[0].bytes);
    CHECK(back.host_links[0].bytes_per_s == rates.host_links[0].bytes_per_s);

    // A probed link a thousand times slower than the preset's: every copy of the step takes longer.
    const Hardware gpu = *find_device("h100-80gb");
    ProbedRates slow;
    slow.host_links.push_back({plan.host_links[0].bytes, gpu.host_link_bytes_per_s / 1000});
    EstimateOptions o;
    o.probed = std::make_shared<const ProbedRates>(slow);
    EstimateOptions none;
    none.probed = std::make_shared<const ProbedRates>(ProbedRates{});
    CHECK(step_time(m, off, gpu, o).offload_s > step_time(m, off, gpu, none).offload_s);
    CHECK(back.host_link_bytes_per_s(1e9) == back.host_links[0].bytes_per_s);  // the nearest probed size serves
}

TEST_CASE("QLoRA's NF4 dequantization is probed per compute dtype and priced per pass over the layers",
          "[probe][estimate][qlora]") {
    const ModelSpec m = *find_model("tiny");
    TrialConfig qlora = tiny_config(2, 64, Precision::bf16_mixed);
    qlora.method = Method::qlora;
    qlora.lora_rank = 8;
    TrialConfig fp16 = qlora;
    fp16.precision = Precision::fp16_mixed;
    TrialConfig lora = qlora;
    lora.method = Method::lora;
    // Only a sweep with qlora asks for it, once per compute dtype.
    CHECK(probe::plan_probes(m, {lora}).dequantize.empty());
    const ProbedRates plan = probe::plan_probes(m, {qlora, fp16, lora, qlora});
    REQUIRE(plan.dequantize.size() == 2);
    CHECK(plan.dequantize[0].hidden == static_cast<std::int64_t>(m.hidden));
    CHECK(plan.dequantize[0].ffn == static_cast<std::int64_t>(m.ffn));

    // Measured on a backend, and back from its records.
    const auto [rates, back] = measure_and_read_back(plan);
    for (const DequantizeRate& d : rates.dequantize) CHECK(d.layer_s > 0);
    REQUIRE(back.dequantize.size() == 2);
    CHECK(back.dequantize[1].dtype == rates.dequantize[1].dtype);
    CHECK(back.dequantize[1].layer_s == rates.dequantize[1].layer_s);
    CHECK(back.dequantize[1].kv_dim == static_cast<std::int64_t>(m.kv_dim()));

    // The time model: each layer before the forward's and the backward's GEMMs, at the probed time.
    ProbedRates priced = back;
    for (DequantizeRate& d : priced.dequantize) d.layer_s = 1e-3;
    EstimateOptions o;
    o.probed = std::make_shared<const ProbedRates>(priced);
    const Hardware cpu = *find_device("cpu");
    const double layers = static_cast<double>(m.layers);
    CHECK(step_time(m, qlora, cpu, o).dequantize_s == Approx(2 * layers * 1e-3));
    qlora.grad_accum = 2;
    CHECK(step_time(m, qlora, cpu, o).dequantize_s == Approx(4 * layers * 1e-3));
    // Full checkpointing dequantizes again for the recompute, all but the down projection.
    qlora.grad_accum = 1;
    qlora.checkpointing = Checkpointing::full;
    const double h = static_cast<double>(m.hidden), kv = static_cast<double>(m.kv_dim());
    const double f = static_cast<double>(m.ffn);
    const double down_share = h * f / (2 * h * h + 2 * kv * h + 3 * f * h);
    CHECK(step_time(m, qlora, cpu, o).dequantize_s == Approx(layers * (3 - down_share) * 1e-3));
    // LoRA has no NF4 base; a qlora estimate without the probe keeps the nominal bandwidth term.
    CHECK(step_time(m, lora, cpu, o).dequantize_s == 0);
    CHECK(step_time(m, qlora, cpu, EstimateOptions{}).dequantize_s > 0);
}

TEST_CASE("the store caches probes per host, software and device", "[probe][store]") {
    test::ScratchDir dir;
    Store db(dir.file("p.db"), Store::Mode::read_write);
    const ProbeKey key{"host-a", "tune 1.0", "cpu threads=1"};
    CHECK(db.cached_probes(key).empty());
    // Rows are keyed by the records' keys (probe/probe_records.h), as probes_for_sweep writes them.
    ProbedRates rates;
    rates.gemm = {{128, 64, 64, ProbeDtype::f32, 1e9, GemmPass::forward, {}}};
    rates.optimizers = {{Optimizer::adamw, Precision::fp32, 256, {{1, 64}}, 1e-3}};
    const std::vector<probe::ProbeRecord> records = probe::records_of(rates);
    REQUIRE(records.size() == 2);
    const std::vector<ProbeRow> rows{{records[0].key, 1e9, "FLOP/s", 0.02}, {records[1].key, 1e-3, "s", 0.03}};
    db.cache_probes(key, rows);
    auto back = db.cached_probes(key);
    std::sort(back.begin(), back.end(), [](const ProbeRow& a, const ProbeRow& b) { return a.probe < b.probe; });
    CHECK(back == rows);  // the GEMM's key, {"accumulate":..., sorts before the optimizer's, {"block":...
    CHECK(db.cached_probes({"host-b", "tune 1.0", "cpu threads=1"}).empty());
    db.cache_probes(key, std::vector<ProbeRow>{{records[1].key, 2e-3, "s", 0.03}});  // replaced, not added
    CHECK(db.cached_probes(key).size() == 2);
}

namespace {

// One AdamW configuration of the tiny CPU sweep: a handful of probes, measured in well under a second.
SweepSpec one_config_sweep(const std::string& name) {
    return parse_sweep(test::tiny_cpu_sweep(name, R"(
[space]
optimizer = ["adamw"]
context = [64]
micro_batch = [2]
)"),
                       name + ".toml");
}

probe::ProbeSettings quick_probes() {
    probe::ProbeSettings settings;
    settings.min_seconds = 0.001;
    return settings;
}

}  // namespace

TEST_CASE("an implausible cached rate (infinite, 1e-300, negative, another unit) is measured again", "[probe][store]") {
    test::ScratchDir dir;
    Store db(dir.file("c.db"), Store::Mode::read_write);
    const SweepSpec spec = one_config_sweep("probe-bounds");
    const probe::ProbeSettings settings = quick_probes();
    const ProbeKey key{"host-a", "tune 1.0", ""};
    const probe::SweepProbes measured = probe::probes_for_sweep(spec, 1, &db, key, false, settings);
    const ProbeKey stored{"host-a", "tune 1.0", fmt::format("{} threads=1", spec.hardware.device)};
    const probe::ProbeRecord& first = measured.records.front();
    const ProbeRow bad[] = {{first.key, std::numeric_limits<double>::infinity(), first.unit, 0.5},
                            {first.key, 1e-300, first.unit, 0.5},
                            {first.key, -5.0, first.unit, 0.5},
                            {first.key, first.value, "B", 0.5}};
    for (const ProbeRow& row : bad) {
        INFO(row.value << " " << row.unit);
        db.cache_probes(stored, std::vector<ProbeRow>{row});
        const probe::SweepProbes again = probe::probes_for_sweep(spec, 1, &db, key, false, settings);
        CHECK_FALSE(again.cached);
        CHECK(std::isfinite(again.records.front().value));
        CHECK(again.records.front().value > 1e3);
        CHECK(again.records.front().unit == "FLOP/s");
    }
}

TEST_CASE("a sweep's probes are cached by key and read back under their names", "[probe][store]") {
    test::ScratchDir dir;
    Store db(dir.file("c.db"), Store::Mode::read_write);
    const SweepSpec spec = one_config_sweep("probe-cache");
    const probe::ProbeSettings settings = quick_probes();
    const ProbeKey key{"host-a", "tune 1.0", ""};
    const probe::SweepProbes measured = probe::probes_for_sweep(spec, 1, &db, key, false, settings);
    REQUIRE_FALSE(measured.cached);
    REQUIRE_FALSE(measured.records.empty());
    // One row per record, under its key.
    const ProbeKey stored{"host-a", "tune 1.0", fmt::format("{} threads=1", spec.hardware.device)};
    const std::vector<ProbeRow> rows = db.cached_probes(stored);
    REQUIRE(rows.size() == measured.records.size());
    for (const probe::ProbeRecord& r : measured.records)
        CHECK(std::any_of(rows.begin(), rows.end(), [&](const ProbeRow& row) {
            return row.probe == r.key && row.value == r.value && row.unit == r.unit;
        }));

    // A row found by its key comes back with the record's name and key, and the row's numbers.
    const probe::ProbeRecord& first = measured.records.front();
    REQUIRE(first.unit == "FLOP/s");
    db.cache_probes(stored, std::vector<ProbeRow>{{first.key, 123e9, first.unit, 0.5}});
    const probe::SweepProbes cached = probe::probes_for_sweep(spec, 1, &db, key, false, settings);
    REQUIRE(cached.cached);
    REQUIRE(cached.records.size() == measured.records.size());
    for (std::size_t i = 0; i < cached.records.size(); ++i) {
        CHECK(cached.records[i].name == measured.records[i].name);
        CHECK(cached.records[i].key == measured.records[i].key);
    }
    CHECK(cached.records.front().value == 123e9);
    CHECK(cached.records.front().seconds == 0.5);
    CHECK(cached.records.back().value == measured.records.back().value);
    CHECK(cached.rates->gemm.size() == measured.rates->gemm.size());
    CHECK(cached.rates->optimizers.size() == measured.rates->optimizers.size());

    // A cache keyed by names (before keys) is not one: the probes are measured again.
    const ProbeKey by_name{"host-b", "tune 1.0", stored.device};
    std::vector<ProbeRow> named;
    for (const probe::ProbeRecord& r : measured.records) named.push_back({r.name, r.value, r.unit, r.seconds});
    db.cache_probes(by_name, named);
    CHECK_FALSE(probe::probes_for_sweep(spec, 1, &db, {"host-b", "tune 1.0", ""}, false, settings).cached);
}

TEST_CASE("real peak, baseline and untracked round-trip through the store, per rank", "[store][memory]") {
    test::ScratchDir dir;
    Store db(dir.file("r.db"), Store::Mode::read_write);
    const SweepId sweep = db.open_sweep(test::sample_sweep("s"), false).id;
    db.add_trials(sweep,
                  std::vector<NewTrial>{{test::sample_config(0), TrialStatus::pending, "", std::nullopt, 0, {}}});
    auto claimed = db.claim_next_pending(sweep);
    REQUIRE(claimed);
    TrialResult r = test::sample_result(claimed->config, 0);
    r.real_peak = 3000;
    r.baseline = 200;
    r.untracked = -5;
    r.rank_real_peaks = {3000, 2900};
    r.rank_baselines = {200, 190};
    r.rank_untracked = {-5, -7};
    db.record_result(claimed->id, r, "", Timestamp{}, Timestamp{});
    const auto back = db.trial(claimed->id);
    REQUIRE(back);
    CHECK(back->result.real_peak == 3000);
    CHECK(back->result.baseline == 200);
    CHECK(back->result.untracked == -5);
    CHECK(back->result.rank_untracked == std::vector<std::int64_t>{-5, -7});
    CHECK(back->result.rank_baselines == std::vector<std::uint64_t>{200, 190});
    // And in the trial's JSON result, under the same names.
    const nlohmann::json j = r;
    CHECK(j.at("untracked") == -5);
    CHECK(j.get<TrialResult>() == r);
}
