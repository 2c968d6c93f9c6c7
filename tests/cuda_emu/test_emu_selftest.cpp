// `tune selftest`'s op cases on the emulated device: the CUDA backend's
// kernels and cuBLASLt plans executed against the CPU backend.
#include "emu_cases.h"

using tune_emu_test::run_cases;

// The CPU reference's sgemm takes its kernel, and so its order of summation, from the machine's CPU
// (OpenBLAS picks one at run time): a 16-bit output can round one ulp apart from the device's, which is
// 0.26 of the tolerance for f16 at m=64 n=48 k=32 on an AMD EPYC. Half the tolerance still flags drift.
TEST_CASE("emulated device: GEMM self-test cases") { run_cases(tune_emu_test::st::standard_cases(), {"gemm"}, 0.5); }

TEST_CASE("emulated device: attention self-test cases") {
    run_cases(tune_emu_test::st::standard_cases(), {"attention"});
}

TEST_CASE("emulated device: layer self-test cases") {
    run_cases(tune_emu_test::st::standard_cases(), {"embedding", "rmsnorm", "rope", "swiglu", "cross_entropy"});
}

TEST_CASE("emulated device: element-wise self-test cases") {
    run_cases(tune_emu_test::st::standard_cases(), {"add", "scale", "cast", "unscale", "sum_squares", "neftune"});
}

TEST_CASE("emulated device: optimizer self-test cases") {
    run_cases(tune_emu_test::st::standard_cases(), {"adamw", "lion", "sgd", "adam8bit", "adafactor"});
}

TEST_CASE("emulated device: NF4 quantize and dequantize self-test cases") {
    run_cases(tune_emu_test::st::standard_cases(), {"nf4_quantize", "nf4_dequantize"});
}

TEST_CASE("emulated device: ops recorded into a CUDA graph and replayed match the CPU backend calling them again") {
    run_cases(tune_emu_test::st::standard_cases(), {"graph replay"}, 0.5);
}
