// An offload trial on the emulated device against the same trial on the CPU
// backend (losses, to the self-test's 16-bit tolerance) and against the
// estimate (every component of both ledgers; the device's overhead is the
// trial's own measurement).
#pragma once

#include <catch2/catch.hpp>

#include <cmath>

#include "core/config.h"
#include "core/presets.h"
#include "estimate/estimate.h"

namespace tune_emu_test {

inline tune::Estimate check_offload_trial(const tune::TrialConfig& c, const tune::TrialResult& gpu,
                                          const tune::TrialResult& cpu) {
    using namespace tune;
    INFO(summary(c) << ": " << gpu.reason << cpu.reason);
    REQUIRE(gpu.status == TrialStatus::ok);
    REQUIRE(cpu.status == TrialStatus::ok);
    REQUIRE(gpu.losses.size() == cpu.losses.size());
    for (std::size_t s = 0; s < gpu.losses.size(); ++s) {
        INFO("step " << s << ": cuda " << gpu.losses[s] << ", cpu " << cpu.losses[s]);
        CHECK(std::abs(gpu.losses[s] - cpu.losses[s]) <= 5e-2);
    }
    const Estimate e = estimate(c, *find_device("h100-80gb"), EstimateOptions{});
    for (Component m : kComponents) {
        INFO(to_string(m) << ": device " << gpu.memory[m] << " vs " << e.memory[m] << ", host " << gpu.host_memory[m]
                          << " vs " << e.host_memory[m]);
        if (m != Component::overhead) CHECK(gpu.memory[m] == e.memory[m]);
        CHECK(gpu.host_memory[m] == e.host_memory[m]);
    }
    CHECK(gpu.host_memory.peak == e.host_memory.peak);
    CHECK(gpu.host_memory.peak > 0);
    CHECK(gpu.memory[Component::master] == 0);
    CHECK(gpu.memory[Component::optim] == 0);
    return e;
}

}  // namespace tune_emu_test
