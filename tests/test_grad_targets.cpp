// train/grad_targets.h: which tensors a step has not yet written, and the
// zeroing of a flat buffer's padding, on the CPU backend's memory.
#include <catch2/catch.hpp>

#include <vector>

#include "kernels/cpu/cpu_backend.h"
#include "train/grad_targets.h"

using namespace tune;
using namespace tune::train;

namespace {

// Two tensors in 256-element slots: (1, 3) at 0 and (2, 5) at 256, padded to 768 (three ranks' shards).
FlatLayout two_tensors() {
    FlatLayout f;
    f.tensors.push_back(TensorView{"a", 1, 3, 0});
    f.tensors.push_back(TensorView{"b", 2, 5, 256});
    f.numel = 512, f.shard = 256, f.padded = 768;
    return f;
}

}  // namespace

TEST_CASE("grad targets: the padding of a flat buffer is zeroed, its tensors left alone", "[grad-targets]") {
    kernels::CpuBackend backend({1, 0});
    const FlatLayout f = two_tensors();
    std::vector<float> buffer(768, 1.0f);
    zero_padding(backend, buffer.data(), f, kernels::DType::f32);
    for (std::size_t i = 0; i < buffer.size(); ++i) {
        const bool in_tensor = i < 3 || (i >= 256 && i < 266);
        INFO("element " << i);
        CHECK(buffer[i] == (in_tensor ? 1.0f : 0.0f));
    }
}

TEST_CASE("grad targets: a tensor is fresh once per mark, and what no op wrote is zeroed", "[grad-targets]") {
    kernels::CpuBackend backend({1, 0});
    const FlatLayout f = two_tensors();
    std::vector<float> buffer(768, 1.0f);
    UnwrittenTensors unwritten;
    CHECK_FALSE(unwritten.take(0, 0));  // nothing marked: every target adds
    unwritten.mark(0, 2);
    CHECK(unwritten.take(0, 0));  // the first writer overwrites
    CHECK_FALSE(unwritten.take(0, 0));
    unwritten.zero_rest(backend, 0, buffer.data(), f, kernels::DType::f32);
    CHECK(buffer[0] == 1.0f);  // written: kept
    for (int i = 256; i < 266; ++i) CHECK(buffer[static_cast<std::size_t>(i)] == 0.0f);
    CHECK(buffer[266] == 1.0f);         // padding is not a tensor's
    CHECK_FALSE(unwritten.take(0, 1));  // zeroed counts as written
    const GradTarget fresh{buffer.data(), true}, added{buffer.data(), false};
    CHECK(fresh.beta() == 0.0f);
    CHECK(added.beta() == 1.0f);
}
