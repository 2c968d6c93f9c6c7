// The probes' timing loop against ops of known wall-clock cost (label timing).
// The ops busy-wait on the wall clock, so a core taken by another test for a
// scheduler slice lengthens them by milliseconds: ctest runs these alone
// (RUN_SERIAL), as the loop is meant to run on a quiet machine.
#include <catch2/catch.hpp>

#include <chrono>

#include "kernels/cpu/cpu_backend.h"
#include "probe/probe_timing.h"

using namespace tune;

namespace {

// Busy-waits `seconds` on the wall clock, as an op of that cost would take.
void spin_for(double seconds) {
    const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
    while (std::chrono::steady_clock::now() < until) {
    }
}

}  // namespace

TEST_CASE("a probe is the median of its rounds: a stretch where the host slowed does not move it", "[probe]") {
    kernels::CpuBackend backend({1, 0});
    probe::ProbeSettings settings;
    settings.min_seconds = 0.25;  // five rounds of 50 ms
    constexpr double kCall = 100e-6;
    const double steady = probe::seconds_per_call(
        backend, [] { spin_for(kCall); }, settings, nullptr);
    // The untimed call, then 30 ms at 20x the cost inside the first round: the
    // mean over every call would be about 13% high.
    int calls = 0;
    double spent = 0;
    const double disturbed = probe::seconds_per_call(
        backend, [&] { spin_for(++calls >= 2 && calls < 17 ? 20 * kCall : kCall); }, settings, &spent);
    CHECK(steady == Approx(kCall).epsilon(0.05));
    CHECK(disturbed == Approx(kCall).epsilon(0.05));
    CHECK(spent >= settings.min_seconds);
}

TEST_CASE("a probe times its op alone, after what before_each_call runs untimed", "[probe]") {
    kernels::CpuBackend backend({1, 0});
    probe::ProbeSettings settings;
    settings.min_seconds = 0.05;
    constexpr double kCall = 100e-6;
    int ops = 0, primers = 0;
    settings.before_each_call = [&] {
        ++primers;
        spin_for(3 * kCall);
    };
    double spent = 0;
    const double seconds = probe::seconds_per_call(
        backend,
        [&] {
            ++ops;
            spin_for(kCall);
        },
        settings, &spent);
    CHECK(seconds == Approx(kCall).epsilon(0.05));
    CHECK(primers == ops - 1);  // every timed call, not the untimed first
    CHECK(spent >= 4 * kCall * primers);
}
