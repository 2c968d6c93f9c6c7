// The optimizer probes: one per optimizer and precision a sweep runs, over the
// tensors its step updates, records that round-trip by key, the time model
// pricing the update at the probed time per element of the rank's own elements.
#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>

#include "core/presets.h"
#include "estimate/estimate.h"
#include "kernels/cpu/cpu_backend.h"
#include "probe/optimizer_probe.h"
#include "probe/probes.h"

using namespace tune;

namespace {

TrialConfig tiny(Optimizer o, Precision p) {
    TrialConfig c;
    c.model = *find_model("tiny");
    c.micro_batch = 2;
    c.context = 64;
    c.optimizer = o;
    c.precision = p;
    return c;
}

}  // namespace

TEST_CASE("an optimizer probe covers every layer's tensors and the outer buffer's, in the trainer's order",
          "[probe][optimizer]") {
    const ModelSpec m = *find_model("tiny");
    const auto h = static_cast<std::int64_t>(m.hidden), f = static_cast<std::int64_t>(m.ffn);
    const auto v = static_cast<std::int64_t>(m.vocab), kv = static_cast<std::int64_t>(m.kv_dim());
    const std::vector<TensorShape> full = optimizer_probe_tensors(m, tiny(Optimizer::adamw, Precision::fp32));
    // The whole update, as large as a step's: a probe over one layer stayed in a cache the step's buffers did not.
    const std::vector<TensorShape> layer{{1, h}, {h, h}, {kv, h}, {kv, h}, {h, h}, {1, h}, {f, h}, {f, h}, {h, f}};
    std::vector<TensorShape> expected;
    for (std::uint32_t i = 0; i < m.layers; ++i) expected.insert(expected.end(), layer.begin(), layer.end());
    expected.insert(expected.end(), {{v, h}, {1, h}, {v, h}});
    CHECK(full == expected);
    std::int64_t elements = 0;
    for (const TensorShape& t : full) elements += t.numel();
    CHECK(elements == static_cast<std::int64_t>(m.param_count()));
    // Adapters: A (r, in) and B (out, r) per targeted linear (q, k, v, o), in every layer.
    TrialConfig lora = tiny(Optimizer::adamw, Precision::fp32);
    lora.method = Method::lora;
    lora.lora_rank = 8;
    lora.lora_targets = LoraTargets::attention;
    const std::vector<TensorShape> adapters = optimizer_probe_tensors(m, lora);
    REQUIRE(adapters.size() == 8 * m.layers);
    CHECK(adapters[0] == TensorShape{8, h});
    CHECK(adapters[3] == TensorShape{kv, 8});
    CHECK(adapters[8] == TensorShape{8, h});
    // A large model's probe stops at the element budget, its last tensor's rows trimmed.
    const ModelSpec big = *find_model("llama-7b");
    TrialConfig c = tiny(Optimizer::adamw, Precision::fp32);
    c.model = big;
    std::int64_t total = 0;
    for (const TensorShape& t : optimizer_probe_tensors(big, c)) total += t.numel();
    CHECK(total <= kOptimizerProbeElements);
    CHECK(total > kOptimizerProbeElements / 2);
}

TEST_CASE("a device's optimizer probe is large enough not to time launches, and the time model finds it",
          "[probe][optimizer]") {
    // On an H100, 2^18 elements of AdamW took 33 us, 0.13 ns per element: the
    // launches', about ten times its bandwidth's.
    const ModelSpec big = *find_model("llama-7b");
    TrialConfig c = tiny(Optimizer::adamw, Precision::bf16_mixed);
    c.model = big;
    const std::vector<TensorShape> device = optimizer_probe_tensors(big, c, kDeviceOptimizerProbeElements);
    std::int64_t total = 0;
    for (const TensorShape& t : device) total += t.numel();
    CHECK(total <= kDeviceOptimizerProbeElements);
    CHECK(total > kDeviceOptimizerProbeElements / 2);
    CHECK(device.front() == optimizer_probe_tensors(big, c).front());  // the trainer's calls, more of them

    // The plan a sweep on a GPU makes, and the lookup preferring its own model's probe
    // over another model's of the same optimizer listed first.
    const ProbedRates plan = probe::plan_probes(big, {c}, kDeviceOptimizerProbeElements);
    REQUIRE(plan.optimizers.size() == 1);
    CHECK(plan.optimizers[0].tensors == device);
    ProbedRates rates;
    rates.optimizers.push_back({Optimizer::adamw, Precision::bf16_mixed, 256,
                                optimizer_probe_tensors(*find_model("tiny"), c, kDeviceOptimizerProbeElements), 1.0});
    rates.optimizers.push_back({Optimizer::adamw, Precision::bf16_mixed, 256, device, 2e-3});
    const auto per_element = rates.optimizer_seconds_per_element(big, c);
    REQUIRE(per_element);
    CHECK(*per_element == Approx(2e-3 / static_cast<double>(total)));
}

TEST_CASE("plan_probes asks for exactly the sweep's optimizers in its precisions", "[probe][optimizer]") {
    const ModelSpec m = *find_model("tiny");
    TrialConfig longer = tiny(Optimizer::adam8bit, Precision::bf16_mixed);
    longer.context = 128;  // the same update: one probe
    const ProbedRates plan = probe::plan_probes(
        m, {tiny(Optimizer::adamw, Precision::fp32), tiny(Optimizer::adam8bit, Precision::bf16_mixed), longer,
            tiny(Optimizer::lomo, Precision::fp16_mixed)});
    REQUIRE(plan.optimizers.size() == 3);
    CHECK((plan.optimizers[0].optimizer == Optimizer::adamw && plan.optimizers[0].precision == Precision::fp32));
    CHECK(plan.optimizers[1].optimizer == Optimizer::adam8bit);
    CHECK(plan.optimizers[1].precision == Precision::bf16_mixed);
    CHECK((plan.optimizers[2].optimizer == Optimizer::lomo && plan.optimizers[2].precision == Precision::fp16_mixed));
    for (const OptimizerRate& r : plan.optimizers) CHECK(r.tensors.size() == 9 * m.layers + 3);
}

TEST_CASE("optimizer records round-trip by key, under their names", "[probe][optimizer]") {
    ProbedRates rates;
    rates.optimizers.push_back(
        {Optimizer::adam8bit, Precision::bf16_mixed, 128, {{1, 64}, {64, 64}, {176, 64}}, 2.5e-3, false});
    rates.optimizers.push_back({Optimizer::adafactor, Precision::bf16, 256, {{8, 64}}, 1e-4, false});
    const std::vector<probe::ProbeRecord> records = probe::records_of(rates);
    REQUIRE(records.size() == 2);
    CHECK(records[0].name == "optimizer adam8bit bf16-mixed block=128 tensors=1x64,64x64,176x64");
    CHECK(records[0].unit == "s");
    const ProbedRates back = probe::rates_of(records);
    REQUIRE(back.optimizers.size() == 2);
    for (std::size_t i = 0; i < 2; ++i) {
        CHECK(back.optimizers[i].optimizer == rates.optimizers[i].optimizer);
        CHECK(back.optimizers[i].precision == rates.optimizers[i].precision);
        CHECK(back.optimizers[i].block == rates.optimizers[i].block);
        CHECK(back.optimizers[i].tensors == rates.optimizers[i].tensors);
        CHECK(back.optimizers[i].seconds == rates.optimizers[i].seconds);
    }
    // The key says the same in JSON; one no optimizer probe has is not read back.
    const nlohmann::json key = nlohmann::json::parse(records[0].key);
    CHECK(key.at("tensors") == nlohmann::json::parse("[[1,64],[64,64],[176,64]]"));
    const auto spoiled = [&](const char* field, const nlohmann::json& value) {
        nlohmann::json k = key;
        k[field] = value;
        return probe::optimizer_from_key(k);
    };
    CHECK(spoiled("block", 128));
    CHECK_FALSE(spoiled("tensors", nlohmann::json::array()));
    CHECK_FALSE(spoiled("optimizer", "sgd"));
    CHECK_FALSE(spoiled("tensors", "1x4;2x2"));
}

TEST_CASE("the time model prices the update at its optimizer's probed time per owned element",
          "[probe][optimizer][estimate]") {
    const Hardware cpu = *find_device("cpu");
    const TrialConfig adamw = tiny(Optimizer::adamw, Precision::bf16_mixed);
    const TrialConfig adam8bit = tiny(Optimizer::adam8bit, Precision::bf16_mixed);
    ProbedRates rates = probe::plan_probes(adamw.model, {adamw, adam8bit});
    REQUIRE(rates.optimizers.size() == 2);
    rates.optimizers[0].seconds = 1e-4;
    rates.optimizers[1].seconds = 1e-3;  // 8-bit Adam ten times AdamW's time per element
    EstimateOptions o;
    o.probed = std::make_shared<const ProbedRates>(rates);
    const StepTime a = step_time(adamw.model, adamw, cpu, o), b = step_time(adam8bit.model, adam8bit, cpu, o);
    CHECK(b.optimizer_s == Approx(10 * a.optimizer_s));
    // One pass is one layer and the outer buffer; the model has two layers and the outer buffer.
    CHECK(a.optimizer_s > 1e-4);
    CHECK(a.optimizer_s < 2e-4);
    // ZeRO-1 over two ranks: each updates about half.
    TrialConfig sharded = adamw;
    sharded.zero_stage = 1;
    sharded.world_size = 2;
    CHECK(step_time(adamw.model, sharded, cpu, o).optimizer_s == Approx(a.optimizer_s / 2).epsilon(0.1));
    // Not probed (another precision): the nominal term.
    const TrialConfig fp32 = tiny(Optimizer::adamw, Precision::fp32);
    CHECK(step_time(fp32.model, fp32, cpu, o).optimizer_s == Approx(step_time(fp32.model, fp32, cpu, {}).optimizer_s));
}

TEST_CASE("each optimizer's probe runs its own update on the CPU backend in every precision", "[probe][optimizer]") {
    const ModelSpec m = *find_model("tiny");
    kernels::CpuBackend backend({1, 0});
    for (Optimizer opt : kOptimizers)
        for (Precision p : kPrecisions) {
            const TrialConfig c = tiny(opt, p);
            const OptimizerRate r{opt, p, 256, optimizer_probe_tensors(m, c), 0, false};
            double spent = 0;
            probe::ProbeSettings settings;
            settings.min_seconds = 0.001;
            const double seconds = probe::probe_optimizer(backend, r, settings, &spent);
            INFO(to_string(opt) << " " << to_string(p));
            CHECK(seconds > 0);
            CHECK(spent >= seconds);
        }
    CHECK(backend.live_bytes() == 0);
}

TEST_CASE("offload's host update has its own probe on the CPU backend, and the time model takes it on a GPU",
          "[probe][optimizer][offload]") {
    TrialConfig c = tiny(Optimizer::adamw, Precision::bf16_mixed);
    c.zero_stage = 2;
    TrialConfig offloaded = c;
    offloaded.offload = Offload::optimizer;
    // A GPU sweep: the device's update at its size, the host's at the CPU's.
    ProbedRates plan = probe::plan_probes(c.model, {c, offloaded}, kDeviceOptimizerProbeElements);
    REQUIRE(plan.optimizers.size() == 2);
    CHECK_FALSE(plan.optimizers[0].host);
    CHECK(plan.optimizers[1].host);
    CHECK(plan.optimizers[1].tensors == optimizer_probe_tensors(c.model, offloaded, kOptimizerProbeElements));
    // Its record says where, and reads back so; the device's key is the one it always was.
    ProbedRates optimizers_only;
    optimizers_only.optimizers = plan.optimizers;
    const std::vector<probe::ProbeRecord> records = probe::records_of(optimizers_only);
    REQUIRE(records.size() == 2);
    CHECK_THAT(records[1].name, Catch::EndsWith(" on the host"));
    CHECK_FALSE(nlohmann::json::parse(records[0].key).contains("where"));
    const ProbedRates back = probe::rates_of(records);
    REQUIRE(back.optimizers.size() == 2);
    CHECK(back.optimizers[1].host);
    // It runs on the CPU backend.
    kernels::CpuBackend backend({1, 0});
    probe::ProbeSettings settings;
    settings.min_seconds = 0.001;
    double spent = 0;
    CHECK(probe::probe_optimizer(backend, plan.optimizers[1], settings, &spent) > 0);
    // The GPU's step prices the host update at the host's probe: ten times slower, ten times the term.
    const Hardware h100 = *find_device("h100-80gb");
    plan.optimizers[0].seconds = 1e-3;
    plan.optimizers[1].seconds = 1e-3;
    EstimateOptions o;
    o.probed = std::make_shared<const ProbedRates>(plan);
    REQUIRE(plan.host_optimizer_seconds_per_element(c.model, offloaded));
    CHECK_FALSE(plan.host_optimizer_seconds_per_element(c.model, c) == std::nullopt);  // the same optimizer's
    const double fast = step_time(c.model, offloaded, h100, o).offload_s;
    plan.optimizers[1].seconds = 1e-2;
    o.probed = std::make_shared<const ProbedRates>(plan);
    const double slow = step_time(c.model, offloaded, h100, o).offload_s;
    CHECK(slow > 5 * fast);
    // Without offload the host probe prices nothing.
    CHECK(step_time(c.model, c, h100, o).offload_s == 0);
}
