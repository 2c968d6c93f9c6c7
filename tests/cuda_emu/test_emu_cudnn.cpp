// cuDNN's attention path on the emulated device, through the stand-in
// (tests/cudnn_standin): the attention self-test cases and three-step
// training cases with the backend's fused attention running cuDNN's graphs,
// against the CPU backend. The other emulated tests run tune's own kernels.
#include "emu_cases.h"

#include <cstdlib>

#include "train/selftest_training.h"

namespace {

// TUNE_CUDNN_LIBRARY names the stand-in for the backends made in one scope.
struct StandinCudnn {
    StandinCudnn() { ::setenv("TUNE_CUDNN_LIBRARY", TUNE_CUDNN_STANDIN, 1); }
    ~StandinCudnn() { ::unsetenv("TUNE_CUDNN_LIBRARY"); }
};

// The path ran cuDNN's graphs: a forward, and a backward unless `forward_only`.
void check_ran_cudnn(const std::string& path, bool forward_only = false) {
    INFO(path);
    CHECK_THAT(path, Catch::StartsWith("cuDNN 9.19.0: "));
    CHECK_THAT(path, !Catch::Contains(": 0 forward"));
    if (!forward_only) CHECK_THAT(path, !Catch::Contains(" 0 backward"));
}

}  // namespace

TEST_CASE("emulated device: attention self-test cases through cuDNN's graphs on the stand-in") {
    const StandinCudnn on;
    check_ran_cudnn(tune_emu_test::run_cases(tune_emu_test::st::standard_cases(), {"attention"}));
}

TEST_CASE("emulated device: training cases with cuDNN's attention on the stand-in") {
    const StandinCudnn on;
    // The tiny model groups its key/value heads (4 and 2): its 16-bit cases run cuDNN's graphs both ways
    // (fp32 falls back to tune's kernels).
    check_ran_cudnn(tune_emu_test::run_cases(tune::train::training_cases(), {"train_3_steps/adamw"}));
}

// The stand-in records its work into a capturing stream as cuDNN's kernels are recorded on a GPU:
// the graph replay case halves q before each replay, which an attention run at recording would miss.
TEST_CASE("emulated device: cuDNN's attention recorded into a CUDA graph runs at each replay") {
    const StandinCudnn on;
    check_ran_cudnn(tune_emu_test::run_cases(tune_emu_test::st::standard_cases(), {"graph replay"}), true);
}

TEST_CASE("emulated device: TUNE_CUDNN_LIBRARY=off keeps tune's attention kernels and says so") {
    ::setenv("TUNE_CUDNN_LIBRARY", "off", 1);
    const std::string path = tune_emu_test::run_cases(tune_emu_test::st::standard_cases(), {"attention_forward"});
    ::unsetenv("TUNE_CUDNN_LIBRARY");
    CHECK_THAT(path, Catch::StartsWith("tune's kernels") && Catch::Contains("TUNE_CUDNN_LIBRARY=off"));
}
