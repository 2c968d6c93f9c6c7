// The collectives of one step, call by call (estimate/collective_calls.h): their
// bytes add up to what a rank sends (StepTime::comm_bytes), their counts follow
// the trainer's schedule, and the probed time model prices each call at its
// op's latency plus bytes over bandwidth.
#include <catch2/catch.hpp>

#include <memory>

#include "core/presets.h"
#include "core/validity.h"
#include "estimate/collective_calls.h"
#include "estimate/estimate_time.h"
#include "estimate/flat_layout.h"

using namespace tune;

namespace {

TrialConfig config(Optimizer o, std::uint32_t zero, std::uint32_t accum, Method method = Method::full,
                   std::uint32_t ranks = 2) {
    TrialConfig c;
    c.model = *find_model("tiny");
    c.optimizer = o;
    c.zero_stage = zero;
    c.grad_accum = o == Optimizer::lomo ? 1 : accum;
    c.method = method;
    c.world_size = ranks;
    c.precision = Precision::bf16_mixed;
    c.micro_batch = 2;
    c.context = 64;
    return c;
}

double calls_of(const std::vector<CollectiveCall>& calls, Collective op) {
    double n = 0;
    for (const CollectiveCall& c : calls)
        if (c.op == op) n += c.count;
    return n;
}

}  // namespace

TEST_CASE("a step's collective calls add up to the bytes a rank sends", "[estimate][collectives]") {
    const Hardware cpu = *find_device("cpu");
    for (Optimizer o : kOptimizers)
        for (std::uint32_t zero = 0; zero <= 3; ++zero)
            for (std::uint32_t accum : {1u, 3u})
                for (Method method : {Method::full, Method::lora, Method::qlora})
                    for (std::uint32_t ranks : {2u, 4u}) {
                        const TrialConfig c = config(o, zero, accum, method, ranks);
                        if (invalid_reason(c)) continue;
                        double bytes = 0;
                        for (const CollectiveCall& call : collective_calls(c.model, c))
                            bytes += call.count * call.bytes * bus_factor(call.op, ranks);
                        INFO(to_string(o) << " zero " << zero << " accum " << accum << " " << to_string(method)
                                          << " ranks " << ranks);
                        CHECK(bytes == Approx(step_time(c.model, c, cpu, EstimateOptions{}).comm_bytes));
                    }
    CHECK(collective_calls(config(Optimizer::adamw, 3, 2, Method::full, 1).model,
                           config(Optimizer::adamw, 3, 2, Method::full, 1))
              .empty());
}

TEST_CASE("the calls follow the trainer's schedule", "[estimate][collectives]") {
    const double layers = static_cast<double>(find_model("tiny")->layers);
    const auto calls = [](const TrialConfig& c) { return collective_calls(c.model, c); };
    // Stage 0: one all-reduce per buffer (the layers and the outer one), nothing else.
    const auto z0 = calls(config(Optimizer::adamw, 0, 2));
    CHECK(calls_of(z0, Collective::all_reduce) == layers + 1);
    CHECK(calls_of(z0, Collective::all_gather) == 0);
    // Stage 3 with two micro-batches: per micro-batch each layer gathered twice and the outer
    // buffer twice, each layer reduce-scattered once and the outer buffer twice; one scalar norm.
    const auto z3 = calls(config(Optimizer::adamw, 3, 2));
    CHECK(calls_of(z3, Collective::all_gather) == 2 * (2 * layers + 2));
    CHECK(calls_of(z3, Collective::reduce_scatter) == 2 * (layers + 2));
    CHECK(calls_of(z3, Collective::all_reduce) == 1);
    // LOMO all-reduces every tensor alone, in each of its two backward passes (it clips).
    const FlatLayout layout = flat_layout(*find_model("tiny"), TrialConfig{}.adam8bit_block);
    const auto lomo = calls(config(Optimizer::lomo, 0, 1));
    CHECK(calls_of(lomo, Collective::all_reduce) ==
          2 * (layers * static_cast<double>(layout.layer.tensors) + static_cast<double>(layout.outer.tensors)));
}

TEST_CASE("probed collectives: latency plus bytes over bandwidth, per call", "[estimate][collectives][probe]") {
    ProbedRates p;
    // All-reduce at 2 ranks (bus factor 1): 8 bytes in 10 us, 80008 bytes in 110 us.
    p.collectives = {{Collective::all_reduce, 2, 8, 8 / 10e-6}, {Collective::all_reduce, 2, 80008, 80008 / 110e-6}};
    CHECK(*p.collective_seconds(Collective::all_reduce, 2, 40008) == Approx(60e-6));
    CHECK(*p.collective_seconds(Collective::all_reduce, 2, 4) == Approx(10e-6));        // the latency floor
    CHECK(*p.collective_seconds(Collective::all_reduce, 2, 160008) == Approx(210e-6));  // the last slope
    CHECK_FALSE(p.collective_seconds(Collective::all_gather, 2, 8));
    CHECK_FALSE(p.collective_seconds(Collective::all_reduce, 4, 8));
    ProbedRates one;  // one size: bandwidth only
    one.collectives = {{Collective::all_gather, 2, 1000, 2e9}};
    CHECK(*one.collective_seconds(Collective::all_gather, 2, 4000) == Approx(4000 * 0.5 / 2e9));

    // A time model whose every call costs the same 50 us: the step's calls times 50 us.
    const Hardware cpu = *find_device("cpu");
    auto flat = std::make_shared<ProbedRates>();
    for (Collective op : {Collective::all_reduce, Collective::reduce_scatter, Collective::all_gather})
        for (std::uint64_t bytes : {8ull, 1ull << 30})
            flat->collectives.push_back({op, 2, bytes, static_cast<double>(bytes) * bus_factor(op, 2) / 50e-6});
    EstimateOptions o;
    o.probed = flat;
    for (const TrialConfig& c : {config(Optimizer::lomo, 3, 1), config(Optimizer::adamw, 3, 2)}) {
        double n = 0;
        for (const CollectiveCall& call : collective_calls(c.model, c)) n += call.count;
        CHECK(step_time(c.model, c, cpu, o).comm_s == Approx(50e-6 * n));
    }
}
