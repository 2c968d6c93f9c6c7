// Probe records: every kind keyed by compact JSON and read back from the key
// alone, the names people read unchanged, and a key that is not a probe's
// (not JSON, an unknown kind, dtype or enum word, a size below 1) skipped.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "kernels/speed_reference.h"
#include "probe/probe_records.h"

using namespace tune;
using nlohmann::json;

namespace {

// One probe of every kind, each with a value of its own.
ProbedRates one_of_each() {
    ProbedRates r;
    r.gemm = {{256, 64, 64, ProbeDtype::f32, 1e9, GemmPass::input_grad, {.accumulate = true}},
              {128, 256, 64, ProbeDtype::bf16, 2e9, GemmPass::forward, {.fp32 = true}},
              {64, 32, 128, ProbeDtype::f16, 3e9, GemmPass::weight_grad, {}}};
    r.attention = {{2, 64, 4, 2, 16, ProbeDtype::bf16, true, 1e-4, 3e-4}};
    r.elementwise = {{128, ProbeDtype::f32, 64, 32, 176, 256, 4, 2, 16, 1e-5, 2e-5, 3e-5}};
    r.optimizers = {{Optimizer::adam8bit, Precision::bf16_mixed, 128, {{1, 64}, {64, 64}}, 2.5e-3}};
    r.dequantize = {{ProbeDtype::bf16, 256, 128, 688, 4e-4}};
    r.buckets = {{ProbeDtype::bf16, 2, 93184, 7e-5}};
    r.speed_reference_s = 2e-3;
    r.device_baseline_bytes = 557ull << 20;
    r.collectives = {{Collective::reduce_scatter, 2, 8, 3e9, ProbeDtype::bf16}};
    return r;
}

probe::ProbeRecord keyed(const json& key) { return {"a probe", key.dump(), 1.0, "s", 0}; }

// The key of records_of's record named `name`, to spoil one field of.
json key_named(const std::vector<probe::ProbeRecord>& records, const std::string& name) {
    for (const probe::ProbeRecord& r : records)
        if (r.name == name) return json::parse(r.key);
    FAIL("no record named " << name);
    return {};
}

std::string speed_reference_name() {
    return fmt::format("speed-reference gemm f32 n={} x{}", kernels::SpeedReference::kSize,
                       kernels::SpeedReference::kCalls);
}

bool nothing_read(const ProbedRates& r) { return r.empty() && r.speed_reference_s == 0 && !r.device_baseline_bytes; }

}  // namespace

TEST_CASE("every kind of probe is keyed by compact JSON and keeps the name people read", "[probe]") {
    const std::vector<probe::ProbeRecord> records = probe::records_of(one_of_each());
    const std::vector<std::string> names{
        "gemm f32 m=256 n=64 k=64 dx acc",
        "gemm bf16 m=128 n=256 k=64 f32out",
        "gemm f16 m=64 n=32 k=128 dw",
        "attention fused bf16 b=2 s=64 h=4 kvh=2 d=16 forward",
        "attention fused bf16 b=2 s=64 h=4 kvh=2 d=16 backward",
        "elementwise f32 t=128 h=64 kv=32 f=176 v=256 heads=4 kvh=2 d=16 layer-forward",
        "elementwise f32 t=128 h=64 kv=32 f=176 v=256 heads=4 kvh=2 d=16 layer-backward",
        "elementwise f32 t=128 h=64 kv=32 f=176 v=256 heads=4 kvh=2 d=16 outer",
        "optimizer adam8bit bf16-mixed block=128 tensors=1x64,64x64",
        "nf4-dequantize bf16 h=256 kv=128 f=688",
        "bucket bf16 n=2 bytes=93184",
        speed_reference_name(),
        "device baseline",
        "busbw reduce-scatter n=2 bytes=8 bf16"};
    REQUIRE(records.size() == names.size());
    for (std::size_t i = 0; i < names.size(); ++i) CHECK(records[i].name == names[i]);
    // Compact, sorted fields: one probe has one text, the store's cache key.
    CHECK(records[0].key ==
          R"({"accumulate":true,"dtype":"f32","fp32_output":false,"k":64,"m":256,"n":64,"pass":"dx","probe":"gemm"})");
    CHECK(records[8].key == R"({"block":128,"optimizer":"adam8bit","precision":"bf16-mixed","probe":"optimizer",)"
                            R"("tensors":[[1,64],[64,64]]})");
    CHECK(records[13].key == R"({"bytes":8,"dtype":"bf16","op":"reduce-scatter","probe":"collective","ranks":2})");
    CHECK(json::parse(records[4].key).at("pass") == "backward");
    CHECK(json::parse(records[7].key).at("part") == "outer");
    for (const probe::ProbeRecord& r : records) CHECK(json::parse(r.key).dump() == r.key);
}

TEST_CASE("every kind of probe round-trips through its key alone", "[probe]") {
    const ProbedRates rates = one_of_each();
    std::vector<probe::ProbeRecord> records = probe::records_of(rates);
    for (probe::ProbeRecord& r : records) r.name = "renamed";  // names are for people: nothing reads them
    const ProbedRates back = probe::rates_of(records);
    REQUIRE(back.gemm.size() == 3);
    for (std::size_t i = 0; i < 3; ++i) {
        CHECK(back.gemm[i].m == rates.gemm[i].m);
        CHECK(back.gemm[i].n == rates.gemm[i].n);
        CHECK(back.gemm[i].k == rates.gemm[i].k);
        CHECK(back.gemm[i].dtype == rates.gemm[i].dtype);
        CHECK(back.gemm[i].pass == rates.gemm[i].pass);
        CHECK(back.gemm[i].output == rates.gemm[i].output);
        CHECK(back.gemm[i].flops_per_s == rates.gemm[i].flops_per_s);
    }
    REQUIRE(back.attention.size() == 1);  // its two records fill one rate
    const AttentionRate& a = back.attention[0];
    CHECK((a.batch == 2 && a.seq == 64 && a.heads == 4 && a.kv_heads == 2 && a.head_dim == 16));
    CHECK((a.dtype == ProbeDtype::bf16 && a.fused));
    CHECK((a.forward_s == 1e-4 && a.backward_s == 3e-4));
    REQUIRE(back.elementwise.size() == 1);
    const ElementwiseRate& e = back.elementwise[0];
    CHECK((e.tokens == 128 && e.dtype == ProbeDtype::f32 && e.hidden == 64 && e.kv_dim == 32 && e.ffn == 176));
    CHECK((e.vocab == 256 && e.heads == 4 && e.kv_heads == 2 && e.head_dim == 16));
    CHECK((e.layer_forward_s == 1e-5 && e.layer_backward_s == 2e-5 && e.outer_s == 3e-5));
    REQUIRE(back.optimizers.size() == 1);
    const OptimizerRate& o = back.optimizers[0];
    CHECK((o.optimizer == Optimizer::adam8bit && o.precision == Precision::bf16_mixed && o.block == 128));
    CHECK(o.tensors == rates.optimizers[0].tensors);
    CHECK(o.seconds == 2.5e-3);
    REQUIRE(back.dequantize.size() == 1);
    const DequantizeRate& d = back.dequantize[0];
    CHECK((d.dtype == ProbeDtype::bf16 && d.hidden == 256 && d.kv_dim == 128 && d.ffn == 688 && d.layer_s == 4e-4));
    REQUIRE(back.buckets.size() == 1);
    const BucketRate& b = back.buckets[0];
    CHECK((b.dtype == ProbeDtype::bf16 && b.ranks == 2 && b.bytes == 93184 && b.seconds == 7e-5));
    CHECK(back.speed_reference_s == 2e-3);
    CHECK(back.device_baseline_bytes == rates.device_baseline_bytes);
    REQUIRE(back.collectives.size() == 1);
    const CollectiveRate& c = back.collectives[0];
    CHECK((c.op == Collective::reduce_scatter && c.ranks == 2 && c.bytes == 8 && c.dtype == ProbeDtype::bf16));
    CHECK(c.bus_bytes_per_s == 3e9);
}

TEST_CASE("a record whose key is not a probe's is skipped, and the specific readers reject it", "[probe]") {
    const ProbedRates rates = one_of_each();
    const std::vector<probe::ProbeRecord> records = probe::records_of(rates);
    const json gemm = key_named(records, "gemm f32 m=256 n=64 k=64 dx acc");
    const json optimizer = probe::probe_key(rates.optimizers[0]);
    const json collective = probe::probe_key(rates.collectives[0]);
    const auto with = [](json key, const char* field, const json& value) {
        key[field] = value;
        return key;
    };
    std::vector<probe::ProbeRecord> bad{
        {"not JSON", "gemm f32 m=256 n=64 k=64", 1, "FLOP/s", 0},
        {"cut short", R"({"probe":"gemm","dtype":"f32")", 1, "FLOP/s", 0},
        {"not an object", "[1,2]", 1, "s", 0},
        {"no kind", "{}", 1, "s", 0},
        keyed({{"probe", "tpu-matmul"}}),
        keyed(with(gemm, "dtype", "f8")),
        keyed(with(gemm, "m", 0)),
        keyed(with(gemm, "n", -64)),
        keyed(with(gemm, "k", "64")),
        keyed(with(gemm, "pass", "dy")),
        keyed(with(gemm, "accumulate", 1)),
        keyed(with(optimizer, "optimizer", "sgd")),
        keyed(with(optimizer, "precision", "fp8")),
        keyed(with(optimizer, "tensors", json::array())),
        keyed(with(optimizer, "tensors", json::array({json::array({1, 4, 2})}))),
        keyed(with(optimizer, "tensors", "1x4,2x2")),
        keyed(with(optimizer, "block", 0)),
        keyed(with(collective, "dtype", "f8")),
        keyed(with(collective, "op", "broadcast")),
        keyed(with(collective, "ranks", 1ull << 40)),
        keyed(with(key_named(records, "bucket bf16 n=2 bytes=93184"), "bytes", 0)),
        keyed(with(key_named(records, speed_reference_name()), "size", 2 * kernels::SpeedReference::kSize)),
    };
    for (const probe::ProbeRecord& r : bad) {
        INFO(r.key);
        CHECK(nothing_read(probe::rates_of({r})));
    }
    // Only the bad record is skipped: the good one beside it is read.
    bad.push_back(records[0]);
    const ProbedRates back = probe::rates_of(bad);
    CHECK(back.gemm.size() == 1);
    CHECK(back.optimizers.empty());
    CHECK(back.collectives.empty());

    CHECK(probe::collective_from_key(collective));
    CHECK_FALSE(probe::collective_from_key(with(collective, "dtype", "f8")));
    CHECK_FALSE(probe::collective_from_key(with(collective, "bytes", -8)));
    CHECK_FALSE(probe::collective_from_key(optimizer));                       // another kind's key
    CHECK_FALSE(probe::collective_from_key("busbw all-reduce n=2 bytes=8"));  // a name is not a key
    CHECK_FALSE(probe::collective_from_key(json::parse("not json", nullptr, false)));
    CHECK(probe::optimizer_from_key(optimizer));
    CHECK_FALSE(probe::optimizer_from_key(with(optimizer, "optimizer", "sgd")));
    CHECK_FALSE(probe::optimizer_from_key(with(optimizer, "tensors", json::array())));
    CHECK_FALSE(probe::optimizer_from_key(with(optimizer, "tensors", json::array({json::array({1, 0})}))));
    CHECK_FALSE(probe::optimizer_from_key(collective));
    json missing = optimizer;
    missing.erase("block");
    CHECK_FALSE(probe::optimizer_from_key(missing));
}
