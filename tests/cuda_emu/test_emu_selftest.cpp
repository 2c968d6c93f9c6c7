// `tune selftest`'s op cases on the emulated device: the CUDA backend's
// kernels and cuBLASLt plans executed against the CPU backend.
#include "emu_cases.h"

#include <algorithm>
#include <set>
#include <string>
#include <vector>

using tune_emu_test::run_cases;

namespace {

// The op-name prefixes each test below runs: one list, so the coverage test at the end can tell a case
// that no test runs.
const std::vector<std::string> kGemm{"gemm"};
const std::vector<std::string> kAttention{"attention"};
const std::vector<std::string> kLayer{"embedding", "rmsnorm", "rope", "swiglu", "cross_entropy"};
const std::vector<std::string> kElementWise{
    "add", "scale", "cast", "unscale", "sum_squares", "neftune", "gradient_multiplier"};
const std::vector<std::string> kOptimizer{"adamw", "lion", "sgd", "adam8bit", "adafactor"};
const std::vector<std::string> kNf4{"nf4_quantize", "nf4_dequantize"};
const std::vector<std::string> kGraph{"graph replay"};
const std::vector<std::string> kSideWork{"side work"};

bool starts_with_any(const std::string& op, const std::vector<std::string>& prefixes) {
    return std::any_of(prefixes.begin(), prefixes.end(), [&](const std::string& p) { return op.rfind(p, 0) == 0; });
}

}  // namespace

// The CPU reference's sgemm takes its kernel, and so its order of summation, from the machine's CPU
// (OpenBLAS picks one at run time): a 16-bit output can round one ulp apart from the device's, which is
// 0.26 of the tolerance for f16 at m=64 n=48 k=32 on an AMD EPYC. Half the tolerance still flags drift.
TEST_CASE("emulated device: GEMM self-test cases") { run_cases(tune_emu_test::st::standard_cases(), kGemm, 0.5); }

TEST_CASE("emulated device: attention self-test cases") { run_cases(tune_emu_test::st::standard_cases(), kAttention); }

TEST_CASE("emulated device: layer self-test cases") { run_cases(tune_emu_test::st::standard_cases(), kLayer); }

TEST_CASE("emulated device: element-wise self-test cases") {
    run_cases(tune_emu_test::st::standard_cases(), kElementWise);
}

TEST_CASE("emulated device: optimizer self-test cases") { run_cases(tune_emu_test::st::standard_cases(), kOptimizer); }

TEST_CASE("emulated device: NF4 quantize and dequantize self-test cases") {
    run_cases(tune_emu_test::st::standard_cases(), kNf4);
}

TEST_CASE("emulated device: ops recorded into a CUDA graph and replayed match the CPU backend calling them again") {
    run_cases(tune_emu_test::st::standard_cases(), kGraph, 0.5);
}

TEST_CASE("emulated device: work beside the compute stream is ordered after its fork and before its join") {
    run_cases(tune_emu_test::st::standard_cases(), kSideWork);
}

TEST_CASE("emulated device: every self-test case's op is run by one of the tests above") {
    std::set<std::string> missed;
    for (const auto& c : tune_emu_test::st::standard_cases()) {
        const bool run = starts_with_any(c.op, kGemm) || starts_with_any(c.op, kAttention) ||
                         starts_with_any(c.op, kLayer) || starts_with_any(c.op, kElementWise) ||
                         starts_with_any(c.op, kOptimizer) || starts_with_any(c.op, kNf4) ||
                         starts_with_any(c.op, kGraph) || starts_with_any(c.op, kSideWork);
        if (!run) missed.insert(c.op);
    }
    for (const std::string& op : missed) FAIL_CHECK(op << ": no emulated-device test runs its self-test cases");
}
