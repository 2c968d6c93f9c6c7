// The self-test harness on the CPU: the tolerance table, the comparison
// logic, and every standard case run with both backends = CPU (which must
// agree exactly), so `tune selftest` is exercised without a GPU.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstring>
#include <set>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "kernels/cpu/cpu_backend.h"
#include "kernels/cuda/cuda_backend.h"
#include "kernels/device_query.h"
#include "kernels/selftest/case_builder.h"
#include "kernels/selftest/op_coverage.h"
#include "kernels/selftest/selftest.h"
#include "kernels/selftest/tolerance.h"
#include "tests/support/run_command.h"

using namespace tune::kernels;
using namespace tune::kernels::selftest;

TEST_CASE("tolerances loosen from exact to matmul and from f32 to bf16") {
    CHECK(tolerance_for(OpClass::exact, DType::bf16).max_nmse == 0);
    CHECK(tolerance_for(OpClass::exact, DType::f32).max_abs == 0);
    for (DType t : {DType::f32, DType::bf16, DType::f16}) {
        CHECK(tolerance_for(OpClass::elementwise, t).max_nmse <= tolerance_for(OpClass::reduction, t).max_nmse);
        CHECK(tolerance_for(OpClass::reduction, t).max_nmse <= tolerance_for(OpClass::matmul, t).max_nmse);
    }
    for (OpClass c : {OpClass::elementwise, OpClass::reduction, OpClass::matmul, OpClass::optimizer}) {
        CHECK(tolerance_for(c, DType::f32).max_nmse < tolerance_for(c, DType::f16).max_nmse);
        CHECK(tolerance_for(c, DType::f16).max_nmse < tolerance_for(c, DType::bf16).max_nmse);
        CHECK(tolerance_for(c, DType::f32).max_abs < tolerance_for(c, DType::bf16).max_abs);
    }
    // A one-step flip of an 8-bit code passes, two steps do not.
    CHECK(tolerance_for(OpClass::codes, DType::u8).max_abs == 1.0);
}

namespace {

HostTensor floats(const std::string& name, const std::vector<float>& v, OpClass c) {
    HostTensor t;
    t.name = name, t.dtype = DType::f32, t.output = true, t.op_class = c;
    t.bytes.resize(v.size() * 4);
    std::memcpy(t.bytes.data(), v.data(), t.bytes.size());
    return t;
}

}  // namespace

TEST_CASE("outputs within tolerance pass, others fail, inputs are not compared") {
    std::vector<HostTensor> ref{floats("y", {1, 2, 3, 4}, OpClass::elementwise)};
    std::vector<HostTensor> got{floats("y", {1, 2, 3, 4.000001f}, OpClass::elementwise)};
    HostTensor input = floats("x", {0}, OpClass::exact);
    input.output = false;
    ref.push_back(input);
    HostTensor other = input;
    other.bytes[0] = 7;  // differs, but is an input
    got.push_back(other);
    auto out = compare_outputs(ref, got);
    REQUIRE(out.size() == 1);
    CHECK(out[0].pass);

    got[0] = floats("y", {1, 2, 3, 4.1f}, OpClass::elementwise);
    out = compare_outputs(ref, got);
    CHECK_FALSE(out[0].pass);
    CHECK(out[0].stats.worst == 3);
    CHECK(out[0].stats.max_abs == Approx(0.1).epsilon(1e-5));
}

TEST_CASE("8-bit codes compare as indices") {
    HostTensor a;
    a.name = "codes", a.dtype = DType::u8, a.output = true, a.op_class = OpClass::codes;
    a.bytes = {10, 20, 30, 200};
    HostTensor b = a;
    b.bytes[3] = 201;  // one step
    CHECK(compare_outputs({a}, {b})[0].pass);
    b.bytes[3] = 202;  // two steps
    CHECK_FALSE(compare_outputs({a}, {b})[0].pass);
}

TEST_CASE("a case that differs between backends fails, one that throws is an error") {
    CpuBackend one, two;
    int calls = 0;
    Case drift{"scale", "f32", "n=3", [&calls](std::uint64_t seed) {
                   CaseBuilder cb(seed);
                   const auto x = cb.values("x", DType::f32, {1, 2, 3});
                   cb.mark_output(x, OpClass::exact);
                   // The second backend to run scales by a different factor.
                   return cb.build([x, &calls](Backend& be, DeviceTensors& d) {
                       be.scale(d[x], 3, ++calls == 1 ? 2.0f : 2.5f, DType::f32);
                   });
               }};
    const CaseResult r = run_case(drift, one, two, 1);
    CHECK(r.status == Status::fail);
    REQUIRE(r.worst() != nullptr);
    CHECK(r.worst()->name == "x");

    Case broken{"rope_forward", "f32", "odd D", [](std::uint64_t seed) {
                    CaseBuilder cb(seed);
                    const auto x = cb.normal("x", DType::f32, 12);
                    cb.mark_output(x, OpClass::elementwise);
                    return cb.build([x](Backend& be, DeviceTensors& d) {
                        be.rope_forward(d[x], 3, d[x], 3, 1, 4, 1, 3, tune::math::RopeFrequencies{10000.0f},
                                        DType::f32);
                    });
                }};
    const CaseResult e = run_case(broken, one, two, 1);
    CHECK(e.status == Status::error);
    CHECK(e.message.find("cpu: ") == 0);
    CHECK(e.message.find("head_dim") != std::string::npos);
    CHECK(one.live_bytes() == 0);  // buffers freed on the error path too
}

TEST_CASE("the standard cases cover every op of the backend interface") {
    const auto cases = standard_cases();
    for (std::string_view op : uncovered_ops(cases)) FAIL_CHECK("no self-test case checks " << op);
    for (const std::string& op : unknown_ops(cases)) FAIL_CHECK("a case checks " << op << ", not a Backend op");
    // The ops a hand-kept list once missed are in the derived one.
    for (std::string_view op :
         {"nf4_quantize", "nf4_dequantize", "adafactor_partial_sums", "adafactor_statistics", "adafactor_apply"})
        CHECK(std::ranges::find(kBackendOps, op) != std::end(kBackendOps));
}

TEST_CASE("removing the cases of one op leaves it uncovered, and nothing those cases did not check") {
    const auto cases = standard_cases();
    for (std::string_view op : kBackendOps) {
        INFO(op);
        auto without = cases;
        std::set<std::string, std::less<>> removed;  // every op the removed cases checked
        std::erase_if(without, [&](const Case& c) {
            const auto ops = c.checked_ops();
            if (std::ranges::count(ops, op) == 0) return false;
            removed.insert(ops.begin(), ops.end());
            return true;
        });
        CHECK(without.size() < cases.size());
        const auto missing = uncovered_ops(without);
        CHECK(std::ranges::count(missing, op) == 1);
        for (std::string_view m : missing) CHECK(removed.contains(m));
    }
}

TEST_CASE("a case naming no Backend op is reported, and checks cover the ops they list") {
    auto cases = standard_cases();
    cases.push_back({"rmsnorm_fwd", "f32", "N=1", nullptr});
    CHECK(unknown_ops(cases) == std::vector<std::string>{"rmsnorm_fwd"});
    const Case pieces{"adafactor_pieces", "f32", "", nullptr, {"adafactor_apply", "adafactor_stats"}};
    CHECK(unknown_ops({pieces}) == std::vector<std::string>{"adafactor_stats"});
    CHECK(std::ranges::count(uncovered_ops({pieces}), std::string_view("adafactor_apply")) == 0);
}

TEST_CASE("filtering keeps the cases whose op matches") {
    const auto cases = filter_cases(standard_cases(), "attention");
    REQUIRE_FALSE(cases.empty());
    const auto names_attention = [](const std::string& op) { return op.find("attention") != std::string::npos; };
    for (const auto& c : cases) CHECK((names_attention(c.op) || std::ranges::any_of(c.checks, names_attention)));
    // A case that checks attention among other ops (a graph's) is kept by what it checks.
    CHECK(std::ranges::count_if(cases, [](const Case& c) { return c.op == "graph replay"; }) == 1);
    const auto pieces = filter_cases(standard_cases(), "adafactor_apply");  // a case that checks several ops
    REQUIRE_FALSE(pieces.empty());
    for (const auto& c : pieces) CHECK(c.op == "adafactor_pieces");
    CHECK(filter_cases(standard_cases(), "").size() == standard_cases().size());
}

TEST_CASE("CPU against CPU: every standard case passes with zero error") {
    CpuBackend reference, candidate;
    for (const auto& c : standard_cases()) {
        INFO(c.op << " " << c.dtype << " " << c.shape);
        const CaseResult r = run_case(c, reference, candidate, 7);
        INFO(r.message);
        CHECK(r.status == Status::pass);
        CHECK_FALSE(r.outputs.empty());
        for (const auto& o : r.outputs) {
            INFO(o.name);
            CHECK(o.stats.max_abs == 0.0);
        }
    }
    CHECK(reference.live_bytes() == 0);
    CHECK(candidate.live_bytes() == 0);
}

TEST_CASE("tune selftest without a GPU lists every case as skipped and exits 0") {
    const auto r = tune::test::run_tune("selftest --op rmsnorm");
    INFO(r.output);
    CHECK(r.exit_code == 0);
    if (cuda_backend_compiled() && !tune::query_devices().devices.empty()) {
        CHECK(r.output.find("0 failed, 0 errors, 0 skipped") != std::string::npos);  // a GPU here: the cases ran
        return;
    }
    CHECK(r.output.find("every case is skipped") != std::string::npos);
    CHECK(r.output.find("rmsnorm_backward") != std::string::npos);
    CHECK(r.output.find("0 passed, 0 failed, 0 errors") != std::string::npos);
}

TEST_CASE("tune selftest --require-gpu fails where there is no usable GPU instead of skipping") {
    const bool gpu = cuda_backend_compiled() && !tune::query_devices().devices.empty();
    const auto r = tune::test::run_tune("selftest --require-gpu --op rmsnorm");
    INFO(r.output);
    CHECK(r.exit_code == (gpu ? 0 : 1));
    if (!gpu) CHECK(r.output.find("every case is skipped") != std::string::npos);
    const auto stages = tune::test::run_tune("selftest --require-gpu --gpus 2");
    INFO(stages.output);
    if (!gpu) CHECK(stages.exit_code == 1);
}

TEST_CASE("tune selftest --candidate cpu runs the harness end to end") {
    const auto r = tune::test::run_tune("selftest --candidate cpu --op swiglu --json");
    INFO(r.output);
    CHECK(r.exit_code == 0);
    const auto json = nlohmann::json::parse(r.output);
    CHECK(json["candidate"] == "cpu");
    CHECK(json["failed"] == 0);
    // forward and backward, three dtypes, fused and separate halves, and F = 84 (no packs of 8)
    CHECK(json["passed"].get<int>() == 18);
}

TEST_CASE("tune selftest --gpus 2 without GPUs lists every ZeRO stage as skipped and exits 0") {
    const auto r = tune::test::run_tune("selftest --gpus 2");
    INFO(r.output);
    if (cuda_backend_compiled() && tune::query_devices().devices.size() >= 2) return;  // GPUs here: it runs for real
    CHECK(r.exit_code == 0);
    CHECK(r.output.find("every case is skipped") != std::string::npos);
    for (const char* stage : {"zero0/", "zero1/", "zero2/", "zero3/"}) CHECK(r.output.find(stage) != std::string::npos);
    CHECK(r.output.find("4 cases: 0 passed, 0 failed, 4 skipped") != std::string::npos);
    CHECK(r.output.find("mpirun") == std::string::npos);  // nothing was launched

    const auto j = tune::test::run_tune("selftest --gpus 2 --json");
    INFO(j.output);
    CHECK(j.exit_code == 0);
    const auto json = nlohmann::json::parse(j.output);
    CHECK(json["gpus"] == 2);
    CHECK(json["skipped"] == 4);
    CHECK(json["stages"].size() == 4);
    CHECK(json["note"].get<std::string>().find("every case is skipped") != std::string::npos);
}

TEST_CASE("tune selftest --gpus 0 is a usage error") {
    CHECK(tune::test::run_tune("selftest --gpus 0").exit_code == 2);
}
