// Every self-test op case on the emulated device built with AddressSanitizer:
// an out-of-bounds global access in a kernel (or in the backend's launch
// code) aborts this test with ASan's report. Numerics are judged as usual.
#include "emu_cases.h"

TEST_CASE("emulated device under AddressSanitizer: every self-test op case") {
    tune_emu_test::run_cases(tune_emu_test::st::standard_cases(), {""}, 1.0);
}
