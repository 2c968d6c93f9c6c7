// The trainer's tagged allocator: live and peak bytes, the breakdown by
// component at the first moment of the peak, the phase it fell in, and the
// out-of-memory error at the limit.
#include <catch2/catch.hpp>

#include "kernels/cpu/cpu_backend.h"
#include "kernels/error.h"
#include "train/memory/memory.h"

using namespace tune;

TEST_CASE("allocator tracks live bytes per tag and frees on scope exit", "[memory]") {
    kernels::CpuBackend backend({1, 0});
    train::Allocator memory(backend, 0);
    {
        train::Buffer a = memory.allocate(Component::params, 1000);
        train::Buffer b = memory.zeros(Component::activations, 24);
        CHECK(memory.live() == 1024);
        CHECK(memory.live(Component::params) == 1000);
        CHECK(memory.live(Component::activations) == 24);
        CHECK(b.as<unsigned char>()[23] == 0);
        train::Buffer moved = std::move(a);
        CHECK_FALSE(a);
        CHECK(memory.live() == 1024);
    }
    CHECK(memory.live() == 0);
    CHECK(backend.live_bytes() == 0);
    CHECK(memory.peak() == 1024);
    CHECK_FALSE(memory.allocate(Component::grads, 0));
}

TEST_CASE("the breakdown is taken at the first moment of the peak, with its phase", "[memory]") {
    kernels::CpuBackend backend({1, 0});
    train::Allocator memory(backend, 0);
    train::Buffer params = memory.allocate(Component::params, 100);
    memory.set_phase("forward");
    train::Buffer act = memory.allocate(Component::activations, 300);
    act.reset();
    memory.set_phase("head-backward");
    train::Buffer logits = memory.allocate(Component::logits, 300);  // ties: the earlier phase keeps the peak
    logits.reset();
    const MemoryBreakdown& peak = memory.peak_breakdown();
    CHECK(peak.peak == 400);
    CHECK(peak.peak_phase == "forward");
    CHECK(peak[Component::params] == 100);
    CHECK(peak[Component::activations] == 300);
    CHECK(peak[Component::logits] == 0);
    CHECK(peak.total() == peak.peak);
    CHECK(memory.tag_peak(Component::logits) == 300);
}

TEST_CASE("an allocation past the limit raises OutOfMemoryError with requested and live bytes", "[memory]") {
    kernels::CpuBackend backend({1, 0});
    train::Allocator memory(backend, 1000);
    train::Buffer a = memory.allocate(Component::params, 600);
    try {
        train::Buffer b = memory.allocate(Component::optim, 500);
        FAIL("no error");
    } catch (const OutOfMemoryError& e) {
        CHECK(e.requested() == 500);
        CHECK(e.live() == 600);
        CHECK_THAT(e.what(), Catch::Contains("optim"));
    }
    CHECK(memory.live() == 600);  // nothing leaked
}
