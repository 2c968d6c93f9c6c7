// Backend memory (raw allocation, limits raising OutOfMemoryError with the
// requested and live bytes, copies, zeroing) and the buffer comparison the
// self-test judges backends by.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <vector>

#include "kernels/compare.h"
#include "kernels/cpu/cpu_backend.h"
#include "kernels/error.h"
#include "tests/backend_test_util.h"

using namespace tune::kernels;

TEST_CASE("cpu backend memory: aligned buffers, live bytes, limit", "[backend][memory]") {
    CpuBackend backend(CpuBackendOptions{.memory_limit = 4096});
    void* a = backend.allocate(1000);
    void* b = backend.allocate(3000);
    CHECK(reinterpret_cast<std::uintptr_t>(a) % 256 == 0);
    CHECK(backend.live_bytes() == 4000);
    try {
        backend.allocate(200);
        FAIL("expected OutOfMemoryError");
    } catch (const tune::OutOfMemoryError& e) {
        CHECK(e.requested() == 200);
        CHECK(e.live() == 4000);
    }
    backend.deallocate(b, 3000);
    CHECK(backend.live_bytes() == 1000);
    CHECK(backend.allocate(0) == nullptr);

    const std::vector<std::uint8_t> host{1, 2, 3, 4};
    std::vector<std::uint8_t> back(4, 9);
    backend.copy_to_device(a, host.data(), 4);
    backend.copy(static_cast<std::uint8_t*>(a) + 100, a, 4);
    backend.copy_to_host(back.data(), static_cast<std::uint8_t*>(a) + 100, 4);
    CHECK(back == host);
    backend.fill_zero(a, 1000);
    backend.copy_to_host(back.data(), a, 4);
    CHECK(back == std::vector<std::uint8_t>(4, 0));
    backend.deallocate(a, 1000);
    CHECK(backend.live_bytes() == 0);
}

TEST_CASE("compare_buffers: nmse, max error and non-finite mismatches", "[backend][compare]") {
    const std::vector<float> ref{1.0f, 2.0f, -2.0f, 0.0f};
    const std::vector<float> got{1.0f, 2.5f, -2.0f, 0.0f};
    const ErrorStats e = compare_buffers(ref.data(), got.data(), 4);
    CHECK(e.max_abs == Approx(0.5));
    CHECK(e.worst == 1);
    CHECK(e.nmse == Approx(0.25 / 9.0));
    CHECK(within(e, 0.03, 0.5));
    CHECK_FALSE(within(e, 0.02, 0.5));

    const std::vector<float> inf_ref{INFINITY, NAN, 1.0f}, inf_got{INFINITY, 1.0f, NAN};
    CHECK(compare_buffers(inf_ref.data(), inf_got.data(), 3).mismatched_nonfinite == 2);

    // Mixed dtypes compare the stored values.
    const auto h = tune::testing::to_storage({1.0f, 2.0f}, DType::bf16);
    const std::vector<float> f{1.0f, 2.0f};
    const ErrorStats m = compare_buffers(f.data(), DType::f32, h.data(), DType::bf16, 2);
    CHECK(m.max_abs == 0.0);
    CHECK(m.nmse == 0.0);
}
