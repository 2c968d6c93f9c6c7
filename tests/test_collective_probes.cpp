// Collective bus-bandwidth probes: nccl-tests' busbw normalisation, the
// probes a multi-rank sweep plans, their records by key, and the time model
// pricing ZeRO's collectives at the probed bus bandwidth, call by call.
#include <catch2/catch.hpp>

#include <memory>
#include <optional>
#include <stdexcept>
#include <string>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/presets.h"
#include "driver/collective_probes.h"
#include "estimate/collective_calls.h"
#include "estimate/estimate_time.h"
#include "probe/probes.h"

using namespace tune;

namespace {

TrialConfig two_ranks(std::uint32_t zero_stage, Precision p = Precision::fp32) {
    TrialConfig c;
    c.model = *find_model("tiny");
    c.world_size = 2;
    c.zero_stage = zero_stage;
    c.precision = p;
    c.micro_batch = 2;
    c.context = 64;
    return c;
}

}  // namespace

TEST_CASE("bus bandwidth is nccl-tests' algbw times 2(n-1)/n or (n-1)/n", "[probe][collectives]") {
    // 1 MB in 1 ms: algbw 1 GB/s.
    CHECK(bus_bandwidth(Collective::all_reduce, 4, 1e6, 1e-3) == Approx(1.5e9));       // x 2 * 3/4
    CHECK(bus_bandwidth(Collective::reduce_scatter, 4, 1e6, 1e-3) == Approx(0.75e9));  // x 3/4
    CHECK(bus_bandwidth(Collective::all_gather, 4, 1e6, 1e-3) == Approx(0.75e9));
    CHECK(bus_bandwidth(Collective::all_reduce, 2, 1e6, 1e-3) == Approx(1e9));  // x 2 * 1/2
    CHECK(bus_bandwidth(Collective::all_gather, 8, 1e6, 1e-3) == Approx(0.875e9));
    CHECK(bus_bandwidth(Collective::all_reduce, 1, 1e6, 1e-3) == 0);  // one rank moves nothing
    CHECK(bus_bandwidth(Collective::all_reduce, 2, 1e6, 0) == 0);
}

TEST_CASE("the probed bus bandwidth is the nearest probed message size at the same rank count",
          "[probe][collectives]") {
    ProbedRates p;
    p.collectives = {{Collective::all_reduce, 2, 1000, 1e9},
                     {Collective::all_reduce, 2, 1000000, 5e9},
                     {Collective::all_reduce, 4, 1000, 7e9}};
    CHECK(p.bus_bytes_per_s(Collective::all_reduce, 2, 2000) == Approx(1e9));
    CHECK(p.bus_bytes_per_s(Collective::all_reduce, 2, 500000) == Approx(5e9));
    CHECK(p.bus_bytes_per_s(Collective::all_reduce, 4, 1e9) == Approx(7e9));
    CHECK_FALSE(p.bus_bytes_per_s(Collective::all_reduce, 8, 1000));
    CHECK_FALSE(p.bus_bytes_per_s(Collective::all_gather, 2, 1000));
}

TEST_CASE("a multi-rank sweep plans the three collectives at its layer buffers' sizes", "[probe][collectives]") {
    const ModelSpec m = *find_model("tiny");
    TrialConfig one = two_ranks(0);
    one.world_size = 1;
    const ProbedRates plan =
        probe::plan_probes(m, {two_ranks(0), two_ranks(3), two_ranks(2, Precision::bf16_mixed), one});
    // At 2 ranks, per dtype the trainer reduces in (fp32, then bf16): one element per rank for the
    // latency and the layer buffer's size, three collectives each; none at 1 rank.
    REQUIRE(plan.collectives.size() == 12);
    for (const CollectiveRate& c : plan.collectives) CHECK(c.ranks == 2);
    CHECK(plan.collectives[0].bytes == 8);
    CHECK(plan.collectives[0].dtype == ProbeDtype::f32);
    CHECK(plan.collectives[3].bytes == static_cast<std::uint64_t>(collective_message_bytes(m, two_ranks(0))));
    CHECK(plan.collectives[6].bytes == 4);
    CHECK(plan.collectives[6].dtype == ProbeDtype::bf16);
    CHECK(plan.collectives[9].bytes ==
          static_cast<std::uint64_t>(collective_message_bytes(m, two_ranks(2, Precision::bf16_mixed))));
    CHECK(plan.collectives[9].dtype == ProbeDtype::bf16);
    // An fp32 record keeps the name cached before dtypes; a 16-bit one names its dtype.
    CHECK(probe::collective_record_name(plan.collectives[3]) ==
          fmt::format("busbw all-reduce n=2 bytes={}", plan.collectives[3].bytes));
    CHECK(probe::collective_record_name(plan.collectives[10]) ==
          fmt::format("busbw reduce-scatter n=2 bytes={} bf16", plan.collectives[10].bytes));
    nlohmann::json f8 = probe::probe_key(plan.collectives[0]);
    CHECK(probe::collective_from_key(f8));
    f8["dtype"] = "f8";
    CHECK_FALSE(probe::collective_from_key(f8));
    // Their records round-trip by key, and through the child's plan and result lines.
    ProbedRates measured = plan;
    for (auto& c : measured.collectives) c.bus_bytes_per_s = 3e9;
    const ProbedRates back = probe::rates_of(probe::records_of(measured));
    REQUIRE(back.collectives.size() == 12);
    for (std::size_t i : {5, 11}) {
        CHECK(back.collectives[i].op == measured.collectives[i].op);
        CHECK(back.collectives[i].bytes == measured.collectives[i].bytes);
        CHECK(back.collectives[i].dtype == measured.collectives[i].dtype);
        CHECK(back.collectives[i].bus_bytes_per_s == 3e9);
    }
    const std::string plan_json = collective_plan_json(plan.collectives);
    CHECK(nlohmann::json::parse(plan_json).at(10) == probe::probe_key(plan.collectives[10]));  // keys, not names
    const auto parsed = parse_collective_plan(plan_json);
    REQUIRE(parsed.size() == 12);
    CHECK(parsed[1].op == Collective::reduce_scatter);
    CHECK(parsed[10].dtype == ProbeDtype::bf16);
    CHECK(parsed[10].bytes == plan.collectives[10].bytes);
    const std::string line = collective_result_line({{measured.collectives[2], 0.5}});
    CHECK(nlohmann::json::parse(line).at(0).at("key") == probe::probe_key(measured.collectives[2]));
    const auto results = parse_collective_results("log line\n" + line + "\n\n");
    REQUIRE(results.size() == 1);
    CHECK(results[0].rate.op == Collective::all_gather);
    CHECK(results[0].rate.bus_bytes_per_s == 3e9);
    CHECK(results[0].seconds == 0.5);
    // A result of no collective's key is passed over.
    CHECK(parse_collective_results(R"([{"key":{"probe":"gemm"},"bus_bytes_per_s":1,"seconds":1}])").empty());
}

TEST_CASE("a collective plan of anything but collective probes' keys is refused, naming it", "[probe][collectives]") {
    CHECK(parse_collective_plan("[]").empty());
    CHECK_THROWS_WITH(parse_collective_plan(R"([{"probe":"broadcast","ranks":2}])"), Catch::Contains("broadcast"));
    CHECK_THROWS_AS(parse_collective_plan(R"([{"probe":"broadcast","ranks":2}])"), std::invalid_argument);
    CHECK_THROWS_WITH(parse_collective_plan(R"(["busbw all-reduce n=2 bytes=8"])"),  // a name is not a key
                      Catch::Contains("busbw all-reduce n=2 bytes=8"));
    nlohmann::json f8 = probe::probe_key(CollectiveRate{Collective::all_reduce, 2, 8, 0, ProbeDtype::f32});
    f8["dtype"] = "f8";
    CHECK_THROWS_WITH(parse_collective_plan(nlohmann::json::array({f8}).dump()), Catch::Contains("f8"));
    CHECK_THROWS_AS(parse_collective_plan(R"({"probe":"collective"})"), std::invalid_argument);
}

TEST_CASE("a 16-bit step's collectives are priced at its dtype's probes, else at fp32's",
          "[probe][collectives][estimate]") {
    const Hardware cpu = *find_device("cpu");
    const TrialConfig fp32 = two_ranks(2), bf16 = two_ranks(2, Precision::bf16_mixed);
    const auto at = [](double fp32_busbw, std::optional<double> bf16_busbw) {
        auto p = std::make_shared<ProbedRates>();
        for (Collective op : {Collective::all_reduce, Collective::reduce_scatter, Collective::all_gather}) {
            p->collectives.push_back({op, 2, 1 << 20, fp32_busbw, ProbeDtype::f32});
            if (bf16_busbw) p->collectives.push_back({op, 2, 1 << 20, *bf16_busbw, ProbeDtype::bf16});
        }
        EstimateOptions o;
        o.probed = p;
        return o;
    };
    // A bf16 reduction that moves at a quarter of fp32's rate takes four times as long.
    const double fp32_only = step_time(bf16.model, bf16, cpu, at(4e9, std::nullopt)).comm_s;
    const double with_bf16 = step_time(bf16.model, bf16, cpu, at(4e9, 1e9)).comm_s;
    REQUIRE(fp32_only > 0);
    CHECK(with_bf16 == Approx(4 * fp32_only));
    // An fp32 step reads the fp32 probes whatever else was probed.
    CHECK(step_time(fp32.model, fp32, cpu, at(4e9, 1e9)).comm_s ==
          Approx(step_time(fp32.model, fp32, cpu, at(4e9, std::nullopt)).comm_s));
}

TEST_CASE("the time model prices collectives at the probed bus bandwidth", "[probe][collectives][estimate]") {
    const Hardware h100 = *find_device("h100-80gb");
    const TrialConfig stage0 = two_ranks(0), stage2 = two_ranks(2);
    const double message = collective_message_bytes(stage0.model, stage0);
    auto probed = std::make_shared<ProbedRates>();
    probed->collectives = {{Collective::all_reduce, 2, static_cast<std::uint64_t>(message), 2e9},
                           {Collective::reduce_scatter, 2, static_cast<std::uint64_t>(message), 1e9},
                           {Collective::all_gather, 2, static_cast<std::uint64_t>(message), 4e9}};
    EstimateOptions nominal, with_probes;
    with_probes.probed = probed;
    const StepTime before = step_time(stage0.model, stage0, h100, nominal);
    const StepTime after = step_time(stage0.model, stage0, h100, with_probes);
    REQUIRE(after.comm_bytes > 0);
    // Stage 0 all-reduces: what a rank sends over the bus bandwidth (no nominal efficiency).
    CHECK(after.comm_s == Approx(after.comm_bytes / 2e9));
    CHECK(after.comm_s != Approx(before.comm_s));
    CHECK(after.compute_s == Approx(before.compute_s));  // no GEMM probed: compute stays nominal
    // Stages 1-3: each call at its own op's bus bandwidth (one size probed: no latency term).
    const StepTime sharded = step_time(stage2.model, stage2, h100, with_probes);
    double expected = 0;
    for (const CollectiveCall& call : collective_calls(stage2.model, stage2)) {
        const double bus = call.op == Collective::all_reduce ? 2e9 : call.op == Collective::reduce_scatter ? 1e9 : 4e9;
        expected += call.count * call.bytes * bus_factor(call.op, 2) / bus;
    }
    CHECK(sharded.comm_s == Approx(expected));
    // Another world size was not probed: nominal link rate.
    TrialConfig four = stage0;
    four.world_size = 4;
    CHECK(step_time(four.model, four, h100, with_probes).comm_s ==
          Approx(step_time(four.model, four, h100, nominal).comm_s));
}
